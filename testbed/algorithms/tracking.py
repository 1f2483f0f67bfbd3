"""Parameter tracking with adaptive local steps: FAdamET, FAdamGT, and the baselines LocalAdam, SCAFFOLD, FedLADA.

Paper: Chen, Zhang, Wang, Liu, Brinton, "Parameter Tracking in Federated Learning with Adaptive Optimization"
(arXiv 2502.02727), Algorithm 1; digest in specs/fadamgt.md. SCAFFOLD: Karimireddy et al. 2020, option II.
Server state: the model x and a tracking variable y. Each device keeps its second moment v_i and its own y_i
between participations (in ServerState.clients, the server's copy of what devices keep; never on the wire).
Each round: sample S, and a tracking subset Y of it (|Y| = ceil(track_fraction |S|)); broadcast x and y. Device i
runs K local steps from x with m = 0 and v = vhat = v_i (AMSGrad max, no bias correction; testbed.local.LocalAdam):
    FAdamGT: ghat = g + y - y_i before the moments (through the objective, <y - y_i, x>), x -= eta D
    FAdamET: ghat = g, x -= eta (D + y - y_i)  (LocalAdam's "shift")
    SCAFFOLD: SGD with g + c - c_i (c = y), every sampled device tracks
    LocalAdam: no tracking (y = 0, Y empty)
then, if i is in Y: y_i' = (1/K) sum_k g_k (GT, raw gradients) or y_i - y + (x - x_i) / (K eta) (ET, SCAFFOLD),
and uploads x_i - x, plus y_i' - y_i if tracked. Server: x += eta_g mean(x_i - x) (uniform over the arrivals);
y += (1/n) sum over tracked arrivals of (y_i' - y_i), n = the fleet's size.
Choices (spec sec. 6): y = y_i = v_i = 0 at the start; vhat starts at v_i; L2 weight decay in the gradient.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from testbed.algorithms.base import (Arrival, Failure, LossFn, Params, Result, RoundContext, ServerState, Strategy,
                                     Task, task_for, weighted_mean)
from testbed.algorithms.fedavg import mean_metric
from testbed.algorithms.moments import MomentAveraging, split_parts
from testbed.payload import Dense, transmit

MODES = ("gt", "et", "scaffold", "none")


@dataclass(frozen=True)
class Tracking(Strategy):
    client: Any                  # LocalAdam(bias_correction=False, amsgrad=True) for the Adam modes, LocalSGD for SCAFFOLD
    mode: str = "gt"             # gt | et | scaffold | none (LocalAdam)
    track_fraction: float = 0.5  # |Y| / |S| (the paper: 5 of 10; SCAFFOLD: all)
    server_lr: float = 1.0       # eta_g
    num_clients: int = 1         # n, the fleet's size: y moves by 1/n of the tracked changes
    dtype: str = "float32"       # of the uplink
    down_dtype: str = "float32"

    @property
    def adaptive(self) -> bool:
        return self.mode != "scaffold"

    def codec(self, tracked: bool, dtype: str) -> Dense:
        return Dense(dtype, ("", "y") if tracked else ("",))

    def init(self, params: Params) -> ServerState:
        return ServerState(params, {"y": {n: torch.zeros_like(p) for n, p in params.items()}})

    def broadcast(self, state: ServerState) -> Params:
        return state.params | {f"y:{n}": t for n, t in state.optimizer["y"].items()} if self.mode != "none" \
            else state.params

    def configure(self, state: ServerState, ctx: RoundContext, rng: np.random.Generator) -> list[Task]:
        chosen = ctx.selected
        # round() first: 0.14 * 50 is 7.000000000000001 in floating point, and |Y| must be 7
        count = 0 if self.mode == "none" else math.ceil(round(self.track_fraction * len(chosen), 9))
        tracked = set(ctx.strategy_rng.choice(chosen, size=count, replace=False).tolist()) if count else set()
        zeros = {n: torch.zeros_like(p) for n, p in state.params.items()}
        y = transmit(Dense(self.down_dtype), state.optimizer["y"])  # as the devices receive it
        tasks = []
        for d in (int(d) for d in chosen):
            kept = state.clients.get(d, {})
            local = {f"v:{n}": kept.get(f"v:{n}", zeros[n]) for n in zeros} if self.adaptive else {}
            local |= {f"y:{n}": kept.get(f"y:{n}", zeros[n]) for n in zeros}
            # y - y_i, which the device would form from the y it receives and its own y_i
            gap = {n: y[n] - local[f"y:{n}"] for n in zeros}
            tasks.append(task_for(d, ctx, self.client, self.codec(self.mode != "none", self.down_dtype),
                                  self.codec(d in tracked, self.dtype), local=local,
                                  extras={"tracked": torch.tensor(float(d in tracked)), "gap": gap}))
        return tasks

    def start(self, task: Task, received: Params) -> tuple[Params, Params | None]:
        model, _ = split_parts(received)
        if not self.adaptive:  # SCAFFOLD: plain SGD; its correction enters through the objective
            return model, None
        v = {n: task.local[f"v:{n}"] for n in model}
        state = self.client.pack({n: torch.zeros_like(p) for n, p in model.items()}, v, v)
        if self.mode == "et":
            state |= {f"shift:{n}": g for n, g in task.extras["gap"].items()}
        elif self.mode == "gt":
            state |= {f"gsum:{n}": torch.zeros_like(p) for n, p in model.items()}
        return model, state

    def objective(self, loss_fn: LossFn):
        corrected = self.mode in ("gt", "scaffold")

        def objective(params, anchor, x, y, extras):
            loss, accuracy = loss_fn(params, x, y)
            if corrected:  # gradient + (y - y_i): the correction enters before the moments
                loss = loss + sum((extras["gap"][n] * params[n]).sum() for n in params)
            return loss, {"accuracy": accuracy}

        return objective

    def finish(self, task: Task, trained: Params, received: Params, stats: dict[str, float],
               opt_state: Params) -> Result:
        model, parts = split_parts(received)
        update = {n: trained[n] - model[n] for n in model}
        kept = {k: t for k, t in opt_state.items() if k.startswith("v:")}
        y_old = {n: task.local[f"y:{n}"] for n in model}
        if bool(task.extras["tracked"]):
            steps = len(self.client.batch_sizes(task.num_samples))
            if self.mode == "gt":
                y_new = {n: opt_state[f"gsum:{n}"] / steps - task.extras["gap"][n] for n in model}
            else:
                y_new = {n: y_old[n] - parts[f"y:{n}"] - update[n] / (steps * self.client.lr) for n in model}
            update |= {f"y:{n}": y_new[n] - y_old[n] for n in model}
            kept |= {f"y:{n}": y_new[n] for n in model}
        else:
            kept |= {f"y:{n}": y_old[n] for n in model}
        return Result(update, stats, kept)

    def aggregate(self, state: ServerState, round: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict[str, float]]:
        if not arrivals:
            return state, {}
        for a in arrivals:
            state.clients[a.device] = a.local_state
        models = [{n: t for n, t in a.update.items() if ":" not in n} for a in arrivals]
        step = weighted_mean(models, [1.0] * len(models))
        params = {n: p + self.server_lr * step[n] for n, p in state.params.items()}
        tracked = [a.update for a in arrivals if any(k.startswith("y:") for k in a.update)]  # sent a y part
        y = {n: t + sum(u[f"y:{n}"] for u in tracked) / self.num_clients for n, t in state.optimizer["y"].items()}
        return ServerState(params, {"y": y}, state.clients), {"train_loss": mean_metric(arrivals, "train_loss")}


@dataclass(frozen=True)
class FedLADA(MomentAveraging):
    """FedLADA (Sun et al. 2023, arXiv 2308.00522, as specs/fadamgt.md sec. 2 states it): local AMSGrad steps from
    m = 0 and the server's averaged vhat, each step blended with the global update estimate g_a:
        x -= eta (alpha m / (sqrt(vhat) + eps) + (1 - alpha) g_a)
    Server: x += eta_g mean(x_i - x); g_a = (x^t - mean x_i) / (eta K); vbar = mean(vhat_i) (uniform means).
    The blend runs as LocalAdam at lr eta alpha with a constant shift (1 - alpha) g_a / alpha, which is exact."""
    SERVER_ON_DEVICE = True   # moments averaged like the model: tensor arithmetic wherever it is

    alpha: float = 0.9               # the paper tunes it in {0.5, 0.7, 0.9}
    local_lr: float = 0.001          # eta (the client optimizer runs at eta alpha)
    local_steps: int = 1             # K
    server_lr: float = 1.0
    uniform: bool = True
    PARTS: ClassVar[tuple[str, ...]] = ("v",)

    @property
    def down(self) -> Dense:
        return Dense(self.down_dtype, ("", "v", "ga"))

    def init(self, params: Params) -> ServerState:
        return ServerState(params, {part: {n: torch.zeros_like(p) for n, p in params.items()} for part in ("v", "ga")})

    def broadcast(self, state: ServerState) -> Params:
        return state.params | {f"{part}:{n}": t for part in ("v", "ga") for n, t in state.optimizer[part].items()}

    def start(self, task: Task, received: Params) -> tuple[Params, Params]:
        model, parts = split_parts(received)
        v = {n: parts[f"v:{n}"] for n in model}
        state = self.client.pack({n: torch.zeros_like(p) for n, p in model.items()}, v, v)
        return model, state | {f"shift:{n}": (1 - self.alpha) / self.alpha * parts[f"ga:{n}"] for n in model}

    def finish(self, task: Task, trained: Params, received: Params, stats: dict[str, float],
               opt_state: Params) -> Result:
        model, parts = split_parts(received)
        return Result({n: trained[n] - model[n] for n in model}
                      | {f"v:{n}": opt_state[f"vmax:{n}"] - parts[f"v:{n}"] for n in model}, stats)

    def aggregate(self, state: ServerState, round: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict[str, float]]:
        if not arrivals:
            return state, {}
        mean = weighted_mean([a.update for a in arrivals], [1.0] * len(arrivals))
        params = {n: p + self.server_lr * mean[n] for n, p in state.params.items()}
        v = {n: t + mean[f"v:{n}"] for n, t in state.optimizer["v"].items()}
        ga = {n: -mean[n] / (self.local_lr * self.local_steps) for n in state.params}
        return ServerState(params, {"v": v, "ga": ga}, state.clients), {"train_loss": mean_metric(arrivals, "train_loss")}
