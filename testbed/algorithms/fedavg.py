"""FedAvg, FedProx and the FedOpt servers (FedAvgM, FedAdam, FedYogi, FedAdagrad).

Papers: McMahan et al., "Communication-Efficient Learning of Deep Networks from Decentralized Data" (2017);
Li et al., "Federated Optimization in Heterogeneous Networks" (FedProx, 2020); Reddi et al., "Adaptive
Federated Optimization" (ICLR 2021); Hsu et al. 2019 (FedAvgM).
Update rule: each selected client runs E epochs of minibatch SGD from the global model x on
    f_i(w) + (mu/2)||w - x||^2          (mu = 0: FedAvg; mu > 0: FedProx)
and sends D_i = w_i - x. The server forms D = sum_i n_i D_i / sum_i n_i (sample-weighted) and applies a server
optimizer to D (testbed/rules.py): x + D for FedAvg, momentum for FedAvgM, Adam/Yogi/Adagrad for FedOpt.
Deviations: Reddi et al. average client deltas uniformly; we weight by samples, as FedAvg does, so that
FedOpt with lr 1 and no momentum reduces to FedAvg. FedProx's inexact local solve is fixed E epochs (as in
its experiments), not a gamma-inexactness test.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from testbed import rules
from testbed.algorithms.base import Arrival, Failure, LossFn, Params, ServerState, Strategy, weighted_mean
from testbed.local import LocalSGD
from testbed.payload import Dense


def proximal_drift(params: Params, anchor: Params) -> torch.Tensor:
    """||w - x||^2 over the tensors of `params` (x: the model received)."""
    return sum((params[n] - anchor[n]).square().sum() for n in params)


def mean_metric(arrivals: list[Arrival], name: str) -> float:
    """A metric of the arrivals, averaged with their sample counts as weights."""
    return float(np.average([a.metrics[name] for a in arrivals], weights=[a.num_samples for a in arrivals]))


def _zeros_like(params: Params) -> Params:
    return {name: torch.zeros_like(p) for name, p in params.items()}


@dataclass(frozen=True)
class ServerSGD:
    """x + lr * m with m = momentum * m + D: FedAvg (lr 1, momentum 0) and FedAvgM."""

    lr: float = 1.0
    momentum: float = 0.0

    def init(self, params: Params) -> dict[str, Params]:
        return {"m": _zeros_like(params)}

    def step(self, params: Params, delta: Params, state: dict[str, Params]) -> tuple[Params, dict[str, Params]]:
        out = {n: rules.server_momentum(params[n], delta[n], state["m"][n], self.lr, self.momentum) for n in params}
        return {n: x for n, (x, _) in out.items()}, {"m": {n: m for n, (_, m) in out.items()}}


@dataclass(frozen=True)
class _ServerAdaptive:
    lr: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.99
    tau: float = 1e-3

    def init(self, params: Params) -> dict[str, Params]:
        return {"m": _zeros_like(params), "v": {n: torch.full_like(p, self.tau**2) for n, p in params.items()}}

    def step(self, params: Params, delta: Params, state: dict[str, Params]) -> tuple[Params, dict[str, Params]]:
        out = {n: self._rule(params[n], delta[n], state["m"][n], state["v"][n]) for n in params}
        return ({n: x for n, (x, _, _) in out.items()},
                {"m": {n: m for n, (_, m, _) in out.items()}, "v": {n: v for n, (_, _, v) in out.items()}})


class ServerAdam(_ServerAdaptive):
    def _rule(self, x, d, m, v):
        return rules.server_adam(x, d, m, v, self.lr, self.beta1, self.beta2, self.tau)


class ServerYogi(_ServerAdaptive):
    def _rule(self, x, d, m, v):
        return rules.server_yogi(x, d, m, v, self.lr, self.beta1, self.beta2, self.tau)


class ServerAdagrad(_ServerAdaptive):
    def _rule(self, x, d, m, v):
        return rules.server_adagrad(x, d, m, v, self.lr, self.beta1, self.tau)


@dataclass(frozen=True)
class FedAvg(Strategy):
    SERVER_ON_DEVICE = True   # means and the server optimizers' rules: tensor arithmetic wherever the model is

    client: LocalSGD
    server: ServerSGD | _ServerAdaptive = field(default_factory=ServerSGD)
    proximal_mu: float = 0.0
    down: Dense = field(default_factory=Dense)
    up: Dense = field(default_factory=Dense)

    def init(self, params: Params) -> ServerState:
        return ServerState(params, self.server.init(params))

    def objective(self, loss_fn: LossFn):
        mu = self.proximal_mu

        def objective(params, anchor, x, y, extras):
            loss, accuracy = loss_fn(params, x, y)
            if mu:
                loss = loss + 0.5 * mu * proximal_drift(params, anchor)
            return loss, {"accuracy": accuracy}

        return objective

    def aggregate(self, state: ServerState, round: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict[str, float]]:
        if not arrivals:  # nobody made it: the model stays as it was
            return state, {}
        delta = weighted_mean([a.update for a in arrivals], [a.num_samples for a in arrivals])
        params, optimizer = self.server.step(state.params, delta, state.optimizer)
        return ServerState(params, optimizer), {"train_loss": mean_metric(arrivals, "train_loss")}
