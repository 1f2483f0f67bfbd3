"""The `algorithm:` section: one small model per algorithm, each building its Strategy.

Every config's `strategy(build)` reads what it needs from a Build: the local optimizer, the codecs, the
submodel costs of the model (submodel methods) and the run's length (P-UCBV's xi = R / (K eps)).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Callable, ClassVar, Literal, Union, get_args

import numpy as np

import torch
from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from testbed.algorithms import (EUCB, PUCBV, CapabilityRatio, FedAvg, FedLPS, FixedRatio, LevelsUpToCapability,
                                ErrorFeedbackAdam, PartialModel, ServerAdagrad, ServerAdam, ServerSGD, ServerYogi,
                                SparseFedAdam, xi_for, FAFED, MFL, FedDA, FedLADA, FedLion, Tracking)
from testbed.algorithms.feddumap import FedDUMAP
from testbed.data.server import SharedData
from testbed.errors import TestbedError
from testbed.local import LocalAdam, LocalDualAveraging, LocalLion, LocalSchedule, LocalSGD
from testbed.payload import Dense, IntegerDelta, Sign, TopK
from testbed.schema.common import Capability, Fraction, Strict
from testbed.schema.flower import FlowerConfig
from testbed.submodel import SubmodelCosts


@dataclass(frozen=True)
class Build:
    """What a strategy is built from."""

    client: LocalSGD
    down: Dense
    up: Dense
    rounds: int                  # stop.max_rounds
    clients_per_round: int
    fleet_size: int
    costs: SubmodelCosts         # the model's prunable units and submodel FLOPs
    shared: SharedData | None = None   # the server's own data (data.server)
    initial_accuracy: Callable[[], np.ndarray] | None = None  # each device's accuracy of the initial model on its
                                                              # training data (P-UCBV's a_k^{-1}), measured on demand

    @property
    def xi(self) -> float:
        return xi_for(self.rounds, self.clients_per_round)

    @property
    def schedule(self) -> dict:
        """The client section's learning rate and minibatch schedule, for a local optimizer other than SGD."""
        return {f: getattr(self.client, f) for f in LocalSchedule.__dataclass_fields__}


# ---- dense methods --------------------------------------------------------------------------------------
# ASYNC: the asynchronous update rules an algorithm runs under (protocol.kind: async): "buffered", FedBuff's
# staleness-weighted updates through the server rule; "mixing", FedAsync's x <- (1 - a) x + a x_new, which needs
# a server that adds the update as it is. Algorithms without it need a round's participants together (moments
# averaged with the model, masks, control variates, pruning) and are refused.
BUFFERED_AND_MIXING, BUFFERED = frozenset({"buffered", "mixing"}), frozenset({"buffered"})


class FedAvgConfig(Strict):
    ASYNC: ClassVar[frozenset] = BUFFERED_AND_MIXING
    name: Literal["fedavg"]

    def strategy(self, b: Build):
        return FedAvg(b.client, down=b.down, up=b.up)


class FedProxConfig(Strict):
    ASYNC: ClassVar[frozenset] = BUFFERED_AND_MIXING
    name: Literal["fedprox"]
    mu: NonNegativeFloat = 0.01

    def strategy(self, b: Build):
        return FedAvg(b.client, proximal_mu=self.mu, down=b.down, up=b.up)


class FedAvgMConfig(Strict):
    ASYNC: ClassVar[frozenset] = BUFFERED
    name: Literal["fedavgm"]
    server_lr: PositiveFloat = 1.0
    server_momentum: Fraction = 0.9

    def strategy(self, b: Build):
        return FedAvg(b.client, ServerSGD(self.server_lr, self.server_momentum), down=b.down, up=b.up)


class FedAdagradConfig(Strict):
    ASYNC: ClassVar[frozenset] = BUFFERED
    name: Literal["fedadagrad"]
    server_lr: PositiveFloat = 0.01   # Reddi et al. tune it per task; 1e-2 is a common start
    beta1: Fraction = 0.0
    tau: PositiveFloat = 1e-3

    def _server(self):
        return ServerAdagrad(self.server_lr, self.beta1, tau=self.tau)

    def strategy(self, b: Build):
        return FedAvg(b.client, self._server(), down=b.down, up=b.up)


class FedAdamConfig(FedAdagradConfig):
    name: Literal["fedadam"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.99

    def _server(self):
        return ServerAdam(self.server_lr, self.beta1, self.beta2, self.tau)


class FedYogiConfig(FedAdamConfig):
    name: Literal["fedyogi"]

    def _server(self):
        return ServerYogi(self.server_lr, self.beta1, self.beta2, self.tau)


# ---- sparse-ratio policies -------------------------------------------------------------------------------
class _IntervalBandit(Strict):
    """Interval bandits over [low, high] (testbed/algorithms/bandits.py)."""

    low: Capability
    high: Capability = 1.0
    partitions: PositiveInt
    rho: PositiveFloat = 0.5
    xi: PositiveFloat | None = None          # R / (K eps); default: stop.max_rounds / round.clients_per_round
    epsilon_greedy: bool = True
    cap: bool
    # L of eq. 17: "paper" log(xi psi eps), which is negative from about a device's third pick (mean-greedy, as
    # the authors' code), or "ucbv" log(m + 1), UCB-V's schedule, which keeps an exploration bonus
    exploration: Literal["paper", "ucbv"] = "paper"

    def policy(self, b: Build):
        return self.POLICY(**self.model_dump(exclude={"kind", "xi"}), xi=self.xi or b.xi)


class PUCBVRatio(_IntervalBandit):
    """FedLPS's P-UCBV bandit, one agent per device (defaults: specs/fedlps.md sec. 6)."""

    POLICY: ClassVar[type] = PUCBV
    kind: Literal["pucbv"]
    low: Capability = 0.5
    partitions: PositiveInt = 5
    delta: float = -0.05
    alpha: NonNegativeFloat = 1.0
    accuracy_scale: PositiveFloat = 1.0
    # a_k^{-1}: "measured", the initial global model's accuracy on the device's training data (the paper), or a
    # number for every device (the authors' code: 0)
    initial_accuracy: Fraction | Literal["measured"] = "measured"
    cap: bool = True

    def policy(self, b: Build):
        measured = self.initial_accuracy == "measured"
        return PUCBV(**self.model_dump(exclude={"kind", "xi", "initial_accuracy"}), xi=self.xi or b.xi,
                     initial_accuracy=0.0 if measured else self.initial_accuracy,
                     measured_initial_accuracy=b.initial_accuracy() if measured else None)


class EUCBRatio(_IntervalBandit):
    """FedMP's E-UCB bandit."""

    POLICY: ClassVar[type] = EUCB
    kind: Literal["eucb"]
    low: Capability = 0.2
    partitions: PositiveInt = 1
    cap: bool = False


class FixedRatioConfig(Strict):
    kind: Literal["fixed"]
    ratio: Capability = 0.5
    cap: bool = False                        # min(z_k, ratio)

    def policy(self, b: Build):
        return FixedRatio(self.ratio, self.cap)


class CapabilityRatioConfig(Strict):
    """s = z_k, the device's capability tier this round."""

    kind: Literal["capability"]

    def policy(self, b: Build):
        return CapabilityRatio()


class LevelsRatio(Strict):
    """s uniform among the width levels <= z_k (FjORD)."""

    kind: Literal["levels"]
    levels: list[Capability] = Field(default_factory=lambda: list(LevelsUpToCapability.levels), min_length=1)

    def policy(self, b: Build):
        return LevelsUpToCapability(tuple(self.levels))


Ratio = Annotated[Union[PUCBVRatio, EUCBRatio, FixedRatioConfig, CapabilityRatioConfig, LevelsRatio],
                  Field(discriminator="kind")]


# ---- submodel methods -----------------------------------------------------------------------------------
class FedLPSConfig(Strict):
    """FedLPS: learnable unit patterns at a per-device ratio (P-UCBV by default)."""

    name: Literal["fedlps"]
    ratio: Ratio = PUCBVRatio(kind="pucbv")
    mu: NonNegativeFloat = 1.0               # proximal weight (paper 1; the authors' code 0)
    lam: NonNegativeFloat = 1.0              # importance-regularizer weight
    code_faithful: bool = False              # the authors' code: no task gradient to the scores, no L_pr, fresh scores

    def strategy(self, b: Build):
        return FedLPS(b.client, b.costs, self.ratio.policy(b), self.mu, self.lam, self.code_faithful, b.down,
                      b.up.dtype)


class FLSTConfig(FedLPSConfig):
    """FedLPS's ablation: learnable patterns at a fixed ratio 0.5."""

    name: Literal["flst"]
    ratio: Ratio = FixedRatioConfig(kind="fixed", ratio=0.5)


class RCRConfig(FedLPSConfig):
    """FedLPS's ablation: learnable patterns at ratio = capability."""

    name: Literal["rcr"]
    ratio: Ratio = CapabilityRatioConfig(kind="capability")


class PartialConfig(Strict):
    """A structurally shrunk submodel per device: any unit pattern with any ratio policy."""

    name: Literal["partial"]
    pattern: Literal["ordered", "rolling", "random", "magnitude"] = "ordered"
    ratio: Ratio = CapabilityRatioConfig(kind="capability")

    def strategy(self, b: Build):
        if any(isinstance(m, torch.nn.RNNBase) for m in b.costs.model.modules()):
            raise TestbedError(f"algorithm.name: {self.name} trains structurally shrunk submodels, which need a "
                               "feed-forward model; use fedlps (masks rows of recurrent layers too) or a conv/linear model")
        return PartialModel(b.client, b.costs, self.pattern, self.ratio.policy(b), b.up.dtype)


class HeteroFLConfig(PartialConfig):
    name: Literal["heterofl"]
    pattern: Literal["ordered"] = "ordered"


class FjORDConfig(PartialConfig):
    name: Literal["fjord"]
    pattern: Literal["ordered"] = "ordered"
    ratio: Ratio = LevelsRatio(kind="levels")


class FedRolexConfig(PartialConfig):
    name: Literal["fedrolex"]
    pattern: Literal["rolling"] = "rolling"


class EFDConfig(PartialConfig):
    name: Literal["efd"]
    pattern: Literal["random"] = "random"


class FedMPConfig(PartialConfig):
    name: Literal["fedmp"]
    pattern: Literal["magnitude"] = "magnitude"
    ratio: Ratio = EUCBRatio(kind="eucb")


# ---- adaptive local optimizers with compressed uplinks ----------------------------------------------------
class FedAdamMomentsConfig(Strict):
    """FedAdam with moment averaging (FedAdam-SSM's Alg. 1): local Adam from the global W, M, V; all three sent
    dense. The client section gives lr, batch_size and local_steps (the paper: 30)."""

    name: Literal["fedadam_moments"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.999
    eps: PositiveFloat = 1e-6

    def _client(self, b: Build) -> LocalAdam:  # the paper's local Adam: no bias correction, eps inside the sqrt
        return LocalAdam(**b.schedule, beta1=self.beta1, beta2=self.beta2, eps=self.eps, bias_correction=False,
                         eps_inside_sqrt=True)

    def _codec(self, b: Build):
        return Dense(b.up.dtype, ("", "m", "v"))

    def strategy(self, b: Build):
        return SparseFedAdam(self._client(b), self._codec(b), b.down.dtype, fairness=self.name == "fairness_top")


class FedAdamSSMConfig(FedAdamMomentsConfig):
    """FedAdam-SSM: one shared top-k mask (of the model update) for the update and both moments."""

    name: Literal["fedadam_ssm"]
    alpha: Annotated[float, Field(gt=0, le=1)] = 0.05      # k = floor(alpha d)
    SELECT_BY: ClassVar[str | None] = None
    SHARED: ClassVar[bool] = True

    def _codec(self, b: Build):
        return TopK(self.alpha, ("", "m", "v"), b.up.dtype, shared_mask=self.SHARED, select_by=self.SELECT_BY)


class FedAdamTopConfig(FedAdamSSMConfig):
    """FedAdam-Top: three independent top-k masks."""

    name: Literal["fedadam_top"]
    SHARED: ClassVar[bool] = False


class FedAdamSSMMConfig(FedAdamSSMConfig):
    name: Literal["fedadam_ssm_m"]
    SELECT_BY: ClassVar[str | None] = "m"


class FedAdamSSMVConfig(FedAdamSSMConfig):
    name: Literal["fedadam_ssm_v"]
    SELECT_BY: ClassVar[str | None] = "v"


class FairnessTopConfig(FedAdamSSMConfig):
    """One shared mask, fair to the update and both moments (top ceil(k/3) of each, united)."""

    name: Literal["fairness_top"]
    SELECT_BY: ClassVar[str | None] = "fair"


class OneBitAdamConfig(FedAdamMomentsConfig):
    """1-bit Adam: dense FedAdam with moment averaging for `warmup_rounds`, then V frozen and the model's and
    momentum's changes sent as 1-bit signs with an rms scale per tensor and error feedback, both ways."""

    name: Literal["onebit_adam"]
    warmup_rounds: NonNegativeInt | None = None   # default: 10% of stop.max_rounds (the spec's recommendation)

    def strategy(self, b: Build):
        warmup = round(0.1 * b.rounds) if self.warmup_rounds is None else self.warmup_rounds
        return ErrorFeedbackAdam(self._client(b), Sign(parts=("", "m"), norm="rms"), b.down.dtype,
                                 warmup_rounds=warmup)


class EfficientAdamConfig(FedAdamMomentsConfig):
    """Efficient Adam: each device's own Adam moments; the model's change sent as 1-bit signs with a mean |x|
    scale per tensor and error feedback, both ways, from the first round."""

    name: Literal["efficient_adam"]

    def strategy(self, b: Build):
        return ErrorFeedbackAdam(self._client(b), Sign(norm="mean_abs"), b.down.dtype, local_moments=True)


class _FixedLocalSteps(Strict):
    """Methods whose payload or state counts local steps: the Scenario checks that client.local_steps is set."""

    NEEDS_LOCAL_STEPS: ClassVar[bool] = True


class FedLionConfig(_FixedLocalSteps):
    """FedLion: local Lion from the global model and momentum; integer deltas + fp32 momentum uplink."""

    name: Literal["fedlion"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.99

    def strategy(self, b: Build):
        up = IntegerDelta(b.client.local_steps, ("m",), b.up.dtype)
        return FedLion(LocalLion(**b.schedule, beta1=self.beta1, beta2=self.beta2), up, b.down.dtype)


class MFLConfig(Strict):
    """MFL: local heavy-ball SGD from the global model and momentum buffer; both averaged."""

    name: Literal["mfl"]
    momentum: Annotated[float, Field(gt=0, lt=1)] = 0.9   # without it MFL is FedAvg

    def strategy(self, b: Build):
        return MFL(LocalSGD(**b.schedule, momentum=self.momentum), Dense(b.up.dtype, ("", "m")), b.down.dtype)


class FAFEDConfig(_FixedLocalSteps):
    """FAFED as run in FedLion's released code: local AdamW (bias-corrected), x, m, v averaged."""

    name: Literal["fafed"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.99
    eps: PositiveFloat = 1e-6

    def strategy(self, b: Build):
        client = LocalAdam(**b.schedule, beta1=self.beta1, beta2=self.beta2, eps=self.eps, decoupled=True)
        return FAFED(client, Dense(b.up.dtype, ("", "m", "v")), b.down.dtype)


class FedDAConfig(Strict):
    """FedDA+SGDwM: local SGD, the EMA momentum summed into P; the server steps with eta_g eta_l mean(P)."""

    name: Literal["fedda"]
    beta: Fraction = 0.9
    server_lr: PositiveFloat = 1.0           # eta_g (the code: 1 on EMNIST, 3.3 on CIFAR)

    def strategy(self, b: Build):
        return FedDA(LocalDualAveraging(**b.schedule, beta=self.beta), Dense(b.up.dtype, ("", "m")), b.down.dtype,
                     server_lr=self.server_lr)


class FAdamGTConfig(Strict):
    """FAdamGT: gradient tracking before the local AMSGrad moments (no bias correction); v_i kept per device."""

    name: Literal["fadamgt"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.99
    eps: PositiveFloat = 1e-8
    weight_decay: NonNegativeFloat = 1e-8
    track_fraction: Annotated[float, Field(gt=0, le=1)] = 0.5   # |Y| / |S|
    server_lr: PositiveFloat = 1.0
    MODE: ClassVar[str] = "gt"

    def strategy(self, b: Build):
        client = LocalAdam(**b.schedule, beta1=self.beta1, beta2=self.beta2, eps=self.eps,
                           weight_decay=self.weight_decay, bias_correction=False, amsgrad=True)
        return Tracking(client, self.MODE, self.track_fraction, self.server_lr, b.fleet_size, b.up.dtype,
                        b.down.dtype)


class FAdamETConfig(FAdamGTConfig):
    """FAdamET: estimate tracking, the correction added after the moments."""

    name: Literal["fadamet"]
    MODE: ClassVar[str] = "et"


class LocalAdamConfig(FAdamGTConfig):
    """LocalAdam: FAdamGT's local rule without tracking."""

    name: Literal["localadam"]
    MODE: ClassVar[str] = "none"


class FedLADAConfig(_FixedLocalSteps):
    """FedLADA: local AMSGrad from the averaged vhat, each step blended with the global update estimate."""

    name: Literal["fedlada"]
    alpha: Annotated[float, Field(gt=0, le=1)] = 0.9
    beta1: Fraction = 0.9
    beta2: Fraction = 0.99
    eps: PositiveFloat = 1e-8
    server_lr: PositiveFloat = 1.0

    def strategy(self, b: Build):
        client = LocalAdam(**(b.schedule | {"lr": b.client.lr * self.alpha}), beta1=self.beta1, beta2=self.beta2,
                           eps=self.eps, bias_correction=False, amsgrad=True)
        return FedLADA(client, Dense(b.up.dtype, ("", "v")), b.down.dtype, alpha=self.alpha, local_lr=b.client.lr,
                       local_steps=b.client.local_steps, server_lr=self.server_lr)


class ScaffoldConfig(Strict):
    """SCAFFOLD (option II): local SGD with control variates, every sampled device updating its own."""

    name: Literal["scaffold"]
    server_lr: PositiveFloat = 1.0

    def strategy(self, b: Build):
        return Tracking(LocalSGD(**b.schedule), "scaffold", 1.0, self.server_lr, b.fleet_size, b.up.dtype,
                        b.down.dtype)


# ---- a server with its own data (FedDUMAP, specs/feddumap.md) ----------------------------------------------
class _ServerDataMethod(Strict):
    """Methods that train on the server's data: the Scenario checks that data.server is set."""

    NEEDS_SERVER_DATA: ClassVar[bool] = True


class DataSharingConfig(_ServerDataMethod):
    """Data-sharing (Zhao et al. 2018): each device also trains on share_fraction x (all device data) random
    server samples (at most n0), then FedAvg with the augmented sizes as weights."""

    name: Literal["data_sharing"]
    share_fraction: Annotated[float, Field(gt=0, le=1)] = 0.05

    def strategy(self, b: Build):
        return FedAvg(b.client, down=b.down, up=b.up)


Prune = Literal["hessian", "uniform", "unstructured", "adaptive"]


class FedDUMAPConfig(_ServerDataMethod):
    """FedDUMAP: dynamic server update (FedDU), device and server momentum (FedDUM), adaptive pruning (FedAP)."""

    name: Literal["feddumap"]
    server_update: Literal["dynamic", "fixed", "client", "none"] = "dynamic"   # fixed: FedDU-S; client: Hybrid-FL
    fixed_steps: PositiveInt = 10           # FedDU-S's tau_eff
    C: PositiveFloat = 1.0
    decay: Annotated[float, Field(gt=0, le=1)] = 0.99
    device_momentum: Fraction = 0.9         # beta' of the devices' EMA momentum, restarted each round (0: plain SGD)
    server_momentum: Fraction | None = 0.9  # beta (None: no server momentum)
    server_lr: PositiveFloat = 1.0          # eta_s
    prune_round: PositiveInt | None = 30    # T_p (None: no pruning)
    prune: Prune = "hessian"                # FedAP | HRank | IMC | PruneFL
    prune_rate: Fraction | None = None      # uniform: the per-layer rate; else a fixed p* instead of the estimate
    lanczos_steps: PositiveInt = 50
    hessian_samples: PositiveInt = 100
    rank_samples: PositiveInt = 500
    reconfigure_every: PositiveInt = 10     # PruneFL (prune: adaptive): rounds between mask reconfigurations

    @model_validator(mode="after")
    def _uniform_needs_rate(self):
        if self.prune == "uniform" and self.prune_rate is None:
            raise ValueError("prune_rate: uniform pruning (HRank) needs a per-layer rate, e.g. 0.4")
        return self

    def strategy(self, b: Build):
        if self.prune_round is not None and self.prune not in ("unstructured", "adaptive") and \
                any(isinstance(m, torch.nn.RNNBase) for m in b.costs.model.modules()):
            raise TestbedError(f"algorithm.prune: {self.name} removes conv filters, which needs a feed-forward "
                               "model; use prune: unstructured (IMC's mask) or a conv model")
        beta = self.device_momentum  # EMA momentum m = b m + (1 - b) g, w -= lr m is torch's with lr (1 - b)
        client = replace(b.client, lr=b.client.lr * (1 - beta), momentum=beta) if beta else b.client
        return FedDUMAP(client, b.costs, b.shared, self.server_update, self.fixed_steps, self.C, self.decay,
                        self.server_momentum, self.server_lr, self.prune_round, self.prune, self.prune_rate,
                        self.lanczos_steps, self.hessian_samples, self.rank_samples, b.down, b.up,
                        self.reconfigure_every)


class FedDUConfig(FedDUMAPConfig):
    name: Literal["feddu"]
    device_momentum: Fraction = 0.0
    server_momentum: Fraction | None = None
    prune_round: PositiveInt | None = None


class FedDUSConfig(FedDUConfig):
    name: Literal["feddu_s"]
    server_update: Literal["dynamic", "fixed", "client", "none"] = "fixed"


class FedDUMConfig(FedDUMAPConfig):
    name: Literal["feddum"]
    prune_round: PositiveInt | None = None


class ServerMConfig(FedDUConfig):
    name: Literal["serverm"]
    server_momentum: Fraction | None = 0.9


class DeviceMConfig(FedDUConfig):
    name: Literal["devicem"]
    device_momentum: Fraction = 0.9


class FedDUAPConfig(FedDUConfig):
    name: Literal["fedduap"]
    prune_round: PositiveInt | None = 30


class FedAPConfig(FedDUAPConfig):
    name: Literal["fedap"]
    server_update: Literal["dynamic", "fixed", "client", "none"] = "none"


class HRankConfig(FedAPConfig):
    name: Literal["hrank"]
    prune: Prune = "uniform"
    prune_rate: Fraction | None = 0.4


class IMCConfig(FedAPConfig):
    name: Literal["imc"]
    prune: Prune = "unstructured"


class PruneFLConfig(FedAPConfig):
    name: Literal["prunefl"]
    prune: Prune = "adaptive"


class HybridFLConfig(FedDUConfig):
    name: Literal["hybrid_fl"]
    server_update: Literal["dynamic", "fixed", "client", "none"] = "client"


Algorithm = Annotated[Union[FedAvgConfig, FedProxConfig, FedAvgMConfig, FedAdagradConfig, FedAdamConfig,
                            FedYogiConfig, FedLPSConfig, FLSTConfig, RCRConfig, PartialConfig, HeteroFLConfig,
                            FjORDConfig, FedRolexConfig, EFDConfig, FedMPConfig, FedAdamMomentsConfig,
                            FedAdamSSMConfig, FedAdamTopConfig, FedAdamSSMMConfig, FedAdamSSMVConfig,
                            FairnessTopConfig, OneBitAdamConfig, EfficientAdamConfig, FedLionConfig, MFLConfig,
                            FAFEDConfig, FedDAConfig, FAdamGTConfig,
                            FAdamETConfig, LocalAdamConfig, ScaffoldConfig, FedLADAConfig,
                            DataSharingConfig, FedDUMAPConfig, FedDUConfig, FedDUSConfig, FedDUMConfig, ServerMConfig,
                            DeviceMConfig, FedDUAPConfig, FedAPConfig, HRankConfig, IMCConfig, PruneFLConfig,
                            HybridFLConfig, FlowerConfig],
                      Field(discriminator="name")]




def runs_async() -> list[str]:
    """The algorithms an asynchronous protocol can run (their configs' ASYNC rules)."""
    configs = get_args(get_args(Algorithm)[0])
    return sorted(get_args(c.model_fields["name"].annotation)[0] for c in configs if getattr(c, "ASYNC", None))
