"""The Strategy of a validated `algorithm:` section: what testbed/build.py makes of it.

`strategy_of(config, build)` reads the section (testbed/schema/algorithms/: plain data, validated) and what a
Build holds besides (the `client:` section's local optimizer, the codecs, the model's submodel costs, the run's
length and the fleet's size) and returns the Strategy, as each algorithm's paper sets it up: its local optimizer
on the client section's schedule (LocalSchedule.schedule), its codecs, its sparse-ratio policy (P-UCBV's and
E-UCB's xi = R / (K eps) from the run's length: ratios.xi_for, where the section leaves it unset).

Each built-in config class has its builder in BUILDERS; a config derived from another (FLST from FedLPS, FedAP from
FedDUAP) is built by the nearest class of its MRO that has one, with its own defaults, as the methods it overrides
said before they moved here. A name that is not a built-in's is a plugin's: its class's `create(build, **options)`.
The schema imports none of this, so that validating a scenario imports neither torch nor the algorithms.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import torch

from testbed.algorithms import (EUCB, FAFED, MFL, PUCBV, CapabilityRatio, ErrorFeedbackAdam, FedAvg, FedDA,
                                FedLADA, FedLion, FedLPS, FixedRatio, LevelsUpToCapability, PartialModel,
                                ServerAdagrad, ServerAdam, ServerSGD, ServerYogi, SparseFedAdam, Tracking)
from testbed.algorithms.base import Build, Strategy
from testbed.algorithms.feddumap import FedDUMAP
from testbed.algorithms.ratios import xi_for
from testbed.errors import TestbedError, refused_options
from testbed.local import LocalAdam, LocalDualAveraging, LocalLion, LocalSGD
from testbed.payload import Dense, IntegerDelta, Sign, TopK
from testbed.schema.algorithms import adaptive, dense, server_data, submodels
from testbed.schema.algorithms.config import AlgorithmConfig
from testbed.schema.algorithms.flower import FlowerConfig, flower_strategy_class
from testbed.schema.algorithms.plugin import PluginAlgorithm


def strategy_of(config: AlgorithmConfig, b: Build) -> Strategy:
    """The run's Strategy, from its `algorithm:` section and the scenario's other pieces."""
    return _nearest(BUILDERS, config)(config, b)


def _nearest(table: dict[type, Callable], config) -> Callable:
    """The entry of `table` for config's class or, failing that, the nearest base class of it that has one."""
    return next(table[cls] for cls in type(config).__mro__ if cls in table)


# ---- dense methods (schema/algorithms/dense.py; testbed/algorithms/fedavg.py) ------------------------------
def _fedavg(c: dense.FedAvgConfig, b: Build) -> Strategy:
    return FedAvg(b.client, down=b.down, up=b.up)


def _fedprox(c: dense.FedProxConfig, b: Build) -> Strategy:
    return FedAvg(b.client, proximal_mu=c.mu, down=b.down, up=b.up)


def _fedavgm(c: dense.FedAvgMConfig, b: Build) -> Strategy:
    return FedAvg(b.client, ServerSGD(c.server_lr, c.server_momentum), down=b.down, up=b.up)


SERVER_OPTIMIZERS: dict[type, Callable] = {
    dense.FedAdagradConfig: lambda c: ServerAdagrad(c.server_lr, c.beta1, tau=c.tau),
    dense.FedAdamConfig: lambda c: ServerAdam(c.server_lr, c.beta1, c.beta2, c.tau),
    dense.FedYogiConfig: lambda c: ServerYogi(c.server_lr, c.beta1, c.beta2, c.tau),
}


def _fedopt(c: dense.FedAdagradConfig, b: Build) -> Strategy:
    return FedAvg(b.client, _nearest(SERVER_OPTIMIZERS, c)(c), down=b.down, up=b.up)


# ---- submodel methods and their ratio policies (schema/algorithms/submodels.py) ------------------------------
def _pucbv(r: submodels.PUCBVRatio, b: Build):
    measured = r.initial_accuracy == "measured"
    return PUCBV(**r.model_dump(exclude={"kind", "xi", "initial_accuracy"}),
                 xi=r.xi or xi_for(b.rounds, b.clients_per_round),
                 initial_accuracy=0.0 if measured else r.initial_accuracy,
                 measured_initial_accuracy=b.initial_accuracy() if measured else None)


POLICIES: dict[type, Callable] = {
    submodels.PUCBVRatio: _pucbv,
    submodels.EUCBRatio: lambda r, b: EUCB(**r.model_dump(exclude={"kind", "xi"}),
                                           xi=r.xi or xi_for(b.rounds, b.clients_per_round)),
    submodels.FixedRatioConfig: lambda r, b: FixedRatio(r.ratio, r.cap),
    submodels.CapabilityRatioConfig: lambda r, b: CapabilityRatio(),
    submodels.LevelsRatio: lambda r, b: LevelsUpToCapability(tuple(r.levels)),
}


def ratio_policy(ratio, b: Build):
    """The sparse-ratio policy (testbed/algorithms/ratios.py) of a submodel method's `ratio:` section."""
    return _nearest(POLICIES, ratio)(ratio, b)


def _fedlps(c: submodels.FedLPSConfig, b: Build) -> Strategy:
    return FedLPS(b.client, b.costs, ratio_policy(c.ratio, b), c.mu, c.lam, c.code_faithful, b.down, b.up.dtype)


def _partial(c: submodels.PartialConfig, b: Build) -> Strategy:
    if any(isinstance(m, torch.nn.RNNBase) for m in b.costs.model.modules()):
        raise TestbedError(f"algorithm.name: {c.name} trains structurally shrunk submodels, which need a "
                           "feed-forward model; use fedlps (masks rows of recurrent layers too) or a conv/linear model")
    return PartialModel(b.client, b.costs, c.pattern, ratio_policy(c.ratio, b), b.up.dtype)


# ---- adaptive local optimizers with compressed uplinks (schema/algorithms/adaptive.py) ------------------------
def _paper_adam(c: adaptive.FedAdamMomentsConfig, b: Build) -> LocalAdam:
    """FedAdam-SSM's local Adam: no bias correction, eps inside the sqrt."""
    return LocalAdam(**b.client.schedule(), beta1=c.beta1, beta2=c.beta2, eps=c.eps, bias_correction=False,
                     eps_inside_sqrt=True)


def _moments(c: adaptive.FedAdamMomentsConfig, b: Build) -> Strategy:
    """FedAdam with moment averaging (dense), or FedAdam-SSM and its baselines (top-k masks, c.alpha)."""
    if isinstance(c, adaptive.FedAdamSSMConfig):
        up = TopK(c.alpha, ("", "m", "v"), b.up.dtype, shared_mask=c.SHARED, select_by=c.SELECT_BY)
    else:
        up = Dense(b.up.dtype, ("", "m", "v"))
    return SparseFedAdam(_paper_adam(c, b), up, b.down.dtype, fairness=c.name == "fairness_top")


def _onebit_adam(c: adaptive.OneBitAdamConfig, b: Build) -> Strategy:
    warmup = round(0.1 * b.rounds) if c.warmup_rounds is None else c.warmup_rounds
    return ErrorFeedbackAdam(_paper_adam(c, b), Sign(parts=("", "m"), norm="rms"), b.down.dtype, warmup_rounds=warmup)


def _efficient_adam(c: adaptive.EfficientAdamConfig, b: Build) -> Strategy:
    return ErrorFeedbackAdam(_paper_adam(c, b), Sign(norm="mean_abs"), b.down.dtype, local_moments=True)


def _fedlion(c: adaptive.FedLionConfig, b: Build) -> Strategy:
    up = IntegerDelta(b.client.local_steps, ("m",), b.up.dtype)
    return FedLion(LocalLion(**b.client.schedule(), beta1=c.beta1, beta2=c.beta2), up, b.down.dtype)


def _mfl(c: adaptive.MFLConfig, b: Build) -> Strategy:
    return MFL(LocalSGD(**b.client.schedule(), momentum=c.momentum), Dense(b.up.dtype, ("", "m")), b.down.dtype)


def _fafed(c: adaptive.FAFEDConfig, b: Build) -> Strategy:
    client = LocalAdam(**b.client.schedule(), beta1=c.beta1, beta2=c.beta2, eps=c.eps, decoupled=True)
    return FAFED(client, Dense(b.up.dtype, ("", "m", "v")), b.down.dtype)


def _fedda(c: adaptive.FedDAConfig, b: Build) -> Strategy:
    return FedDA(LocalDualAveraging(**b.client.schedule(), beta=c.beta), Dense(b.up.dtype, ("", "m")), b.down.dtype,
                 server_lr=c.server_lr)


def _tracking(c: adaptive.FAdamGTConfig, b: Build) -> Strategy:
    client = LocalAdam(**b.client.schedule(), beta1=c.beta1, beta2=c.beta2, eps=c.eps, weight_decay=c.weight_decay,
                       bias_correction=False, amsgrad=True)
    return Tracking(client, c.MODE, c.track_fraction, c.server_lr, b.fleet_size, b.up.dtype, b.down.dtype)


def _fedlada(c: adaptive.FedLADAConfig, b: Build) -> Strategy:
    client = LocalAdam(**(b.client.schedule() | {"lr": b.client.lr * c.alpha}), beta1=c.beta1, beta2=c.beta2,
                       eps=c.eps, bias_correction=False, amsgrad=True)
    return FedLADA(client, Dense(b.up.dtype, ("", "v")), b.down.dtype, alpha=c.alpha, local_lr=b.client.lr,
                   local_steps=b.client.local_steps, server_lr=c.server_lr)


def _scaffold(c: adaptive.ScaffoldConfig, b: Build) -> Strategy:
    return Tracking(LocalSGD(**b.client.schedule()), "scaffold", 1.0, c.server_lr, b.fleet_size, b.up.dtype,
                    b.down.dtype)


# ---- a server with its own data (schema/algorithms/server_data.py) -----------------------------------------
def _feddumap(c: server_data.FedDUMAPConfig, b: Build) -> Strategy:
    if c.prune_round is not None and c.prune not in ("unstructured", "adaptive") and \
            any(isinstance(m, torch.nn.RNNBase) for m in b.costs.model.modules()):
        raise TestbedError(f"algorithm.prune: {c.name} removes conv filters, which needs a feed-forward "
                           "model; use prune: unstructured (IMC's mask) or a conv model")
    beta = c.device_momentum  # EMA momentum m = b m + (1 - b) g, w -= lr m is torch's with lr (1 - b)
    client = replace(b.client, lr=b.client.lr * (1 - beta), momentum=beta) if beta else b.client
    return FedDUMAP(client, b.costs, b.shared, c.server_update, c.fixed_steps, c.C, c.decay, c.server_momentum,
                    c.server_lr, c.prune_round, c.prune, c.prune_rate, c.lanczos_steps, c.hessian_samples,
                    c.rank_samples, b.down, b.up, c.reconfigure_every)


# ---- Flower's strategies and the user's own --------------------------------------------------------------
def _flower(c: FlowerConfig, b: Build) -> Strategy:
    from testbed.algorithms.flower import FlowerStrategy  # imports Flower: only for a scenario that names it

    return FlowerStrategy(b.client, c.reference, dict(c.options), flower_strategy_class(c.reference),
                          down=b.down, up=b.up)


def _plugin(c: PluginAlgorithm, b: Build) -> Strategy:
    """The user's Strategy class's create(build, **options): options it refuses, or anything but a Strategy back,
    are one line each naming the algorithm."""
    try:
        made = c.strategy_class().create(b, **c.options)
    except (TypeError, ValueError) as err:
        raise refused_options("algorithm", c.name, err) from None
    if not isinstance(made, Strategy):
        raise TestbedError(f"algorithm.name: '{c.name}'.create returned {type(made).__name__}, not a "
                           "Strategy; return the strategy (testbed/algorithms/base.py)")
    return made


BUILDERS: dict[type, Callable[[Any, Build], Strategy]] = {
    dense.FedAvgConfig: _fedavg,
    dense.FedProxConfig: _fedprox,
    dense.FedAvgMConfig: _fedavgm,
    dense.FedAdagradConfig: _fedopt,               # FedAdam, FedYogi: their server optimizers above
    submodels.FedLPSConfig: _fedlps,               # FLST, RCR: their ratio defaults
    submodels.PartialConfig: _partial,             # HeteroFL, FjORD, FedRolex, eFD, FedMP
    adaptive.FedAdamMomentsConfig: _moments,       # FedAdam-SSM, -Top, -SSM-m, -SSM-v, fairness top
    adaptive.OneBitAdamConfig: _onebit_adam,
    adaptive.EfficientAdamConfig: _efficient_adam,
    adaptive.FedLionConfig: _fedlion,
    adaptive.MFLConfig: _mfl,
    adaptive.FAFEDConfig: _fafed,
    adaptive.FedDAConfig: _fedda,
    adaptive.FAdamGTConfig: _tracking,             # FAdamET, LocalAdam: their MODE
    adaptive.FedLADAConfig: _fedlada,
    adaptive.ScaffoldConfig: _scaffold,
    server_data.DataSharingConfig: _fedavg,        # FedAvg on the augmented data (build.py shares it)
    server_data.FedDUMAPConfig: _feddumap,         # its ablations, FedAP, HRank, IMC, PruneFL, Hybrid-FL
    FlowerConfig: _flower,
    PluginAlgorithm: _plugin,
}
