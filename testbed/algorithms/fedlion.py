"""FedLion and its baselines MFL and FAFED: local optimizers whose momentum (and moments) the server averages.

Paper: Tang & Chang, "FedLion: Faster Adaptive Federated Optimization with Fewer Communication" (arXiv
2402.09941), with the authors' released code; digest in specs/fedlion.md.
FedLion (Alg. 1): each sampled client starts from the global x and momentum m and runs E local Lion steps
    h = sign(b1 m + (1 - b1) g) ;  x <- x - gamma h ;  m <- b2 m + (1 - b2) g        (testbed.local.LocalLion)
and uploads Delta = (x_prev - x) / gamma = sum of the E signs (integers in [-E, E], ceil(log2(2E+1)) bits each,
payload.IntegerDelta) and its momentum in full precision. Server: x <- x - gamma mean(Delta), m <- mean(m_i).
MFL (Liu et al. 2020): E steps of heavy-ball SGD (b <- mu b + g; x <- x - eta b) from the global x and b; the
server averages both.
FAFED, as the released code runs it (spec sec. 2 (a)): E steps of torch's AdamW (bias-corrected) from the global
x, m, v and step count; the server averages all of them.
Averages are uniform over the round's clients (the code's 1/n), as the spec recommends.
Deviations: FAFED's step count is not sent: every client takes exactly E steps a round, so the averaged count at
the start of round r is (r - 1) E, which the device sets itself. Delta is rounded from (x_prev - x) / gamma in
float32, which recovers the integer sum of signs exactly (the error is far below 1/2 for these magnitudes).
FedDA+SGDwM (Jin et al. ICML 2022, the released code's avg_fedDA): local SGD on the model while an EMA momentum is
summed into P (testbed.local.LocalDualAveraging); the device uploads P (in the model's slot of the payload) and m;
the server steps x <- x - eta_g eta_l mean(P) and averages m.
FAFED's original STORM variant is not implemented.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from testbed.algorithms.base import Params, Result, Task
from testbed.algorithms.moments import MomentAveraging, split_parts


@dataclass(frozen=True)
class FedLion(MomentAveraging):
    SERVER_ON_DEVICE = True   # moments averaged like the model: tensor arithmetic wherever it is
    uniform: bool = True

    def model_update(self, trained: Params, received: Params) -> Params:
        return {n: torch.round((received[n] - trained[n]) / self.client.lr) for n in trained}

    def apply(self, params: Params, mean_update: Params) -> Params:
        return {n: p - self.client.lr * mean_update[n] for n, p in params.items()}


@dataclass(frozen=True)
class MFL(MomentAveraging):
    SERVER_ON_DEVICE = True   # moments averaged like the model: tensor arithmetic wherever it is
    uniform: bool = True


@dataclass(frozen=True)
class FAFED(MomentAveraging):
    SERVER_ON_DEVICE = True   # moments averaged like the model: tensor arithmetic wherever it is
    uniform: bool = True
    PARTS: ClassVar[tuple[str, ...]] = ("m", "v")

    def start(self, task: Task, received: Params) -> tuple[Params, Params]:
        model, moments = split_parts(received)
        steps = (task.round - 1) * self.client.local_steps
        return model, moments | {"step": torch.tensor(float(steps), dtype=torch.float64)}


@dataclass(frozen=True)
class FedDA(MomentAveraging):
    SERVER_ON_DEVICE = True   # moments averaged like the model: tensor arithmetic wherever it is
    uniform: bool = True
    server_lr: float = 1.0           # eta_g

    def start(self, task: Task, received: Params) -> tuple[Params, Params]:
        model, parts = split_parts(received)
        return model, parts | {f"P:{n}": torch.zeros_like(p) for n, p in model.items()}

    def finish(self, task: Task, trained: Params, received: Params, stats: dict[str, float],
               opt_state: Params) -> Result:
        model, parts = split_parts(received)
        sums = {n: opt_state[f"P:{n}"] for n in model}      # sent in the model's slot
        return Result(sums | {f"m:{n}": opt_state[f"m:{n}"] - parts[f"m:{n}"] for n in model}, stats)

    def apply(self, params: Params, mean_update: Params) -> Params:
        return {n: p - self.server_lr * self.client.lr * mean_update[n] for n, p in params.items()}
