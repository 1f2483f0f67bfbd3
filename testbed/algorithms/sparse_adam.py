"""FedAdam with moment averaging and its sparse uplinks: FedAdam, FedAdam-Top, FedAdam-SSM (+ _M, _V), Fairness-Top.

Paper: Deng et al., "Towards Communication-efficient Federated Learning via Sparse and Aligned Adaptive
Optimization" (FedAdam-SSM); digest in specs/fedadam_ssm.md.
Every round each device starts from the global model W and moments M, V, and runs L local Adam steps without
bias correction, eps inside the square root (eq. 3-5; testbed.local.LocalAdam):
    m <- b1 m + (1 - b1) g ;  v <- b2 v + (1 - b2) g^2 ;  w <- w - eta m / sqrt(v + eps)
It uploads DW = w - W, DM = m - M, DV = v - V through its codec (payload.TopK, k = floor(alpha d) of the
flattened model):
    FedAdam        all three, dense
    FedAdam-Top    each sparsified by its own top-k mask (three masks)
    FedAdam-SSM    one shared mask, the top-k of |DW| (eq. 28), applied to all three
    SSM_M, SSM_V   one shared mask from the top-k of |DM|, of |DV|
    Fairness-Top   one shared mask: the top ceil(k/3) of each of |DW|, |DM|, |DV|, united, then filled or trimmed
                   to k by taking the next largest of each in turn (spec's recommendation; the paper gives no rule)
Server: X <- X + sum_n |D_n| DX_n / sum_n |D_n| for X in {W, M, V} (no per-entry renormalization, eq. 10-12).
Deviations: the downlink is counted (the paper ignores it) and is the dense W, M, V, which a device that missed
rounds needs (the paper's devices, all present every round, could download the sparse aggregates instead).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from testbed.algorithms.base import Params, Result, Task
from testbed.algorithms.moments import MomentAveraging, split_parts
from testbed.local import LocalAdam
from testbed.payload import Dense, TopK, flatten_part, unflatten_parts

MOMENTS = ("m", "v")


def fairness_mask(parts: list[torch.Tensor], k: int) -> torch.Tensor:
    """Fairness-aware top-k over several flat vectors of one length (the spec's recommendation): the top ceil(k/P)
    |entries| of each vector, united rank by rank (each vector's 1st, then each one's 2nd...) and cut to k in that
    order; if fewer than k, filled round-robin, each vector adding its next largest not yet chosen. A 0/1 float
    vector with k ones."""
    size = parts[0].numel()
    if not 0 < k <= size:
        raise ValueError(f"fairness_mask: k must be in [1, {size}], got {k}")
    orders = [torch.argsort(p.abs(), descending=True, stable=True).tolist() for p in parts]
    depth = math.ceil(k / len(parts))
    chosen = list(dict.fromkeys(order[rank] for rank in range(min(depth, size)) for order in orders))[:k]
    taken, next_rank = set(chosen), [depth] * len(orders)
    while len(chosen) < k:
        for i, order in enumerate(orders):
            while next_rank[i] < size and order[next_rank[i]] in taken:
                next_rank[i] += 1
            if next_rank[i] < size and len(chosen) < k:
                chosen.append(order[next_rank[i]])
                taken.add(chosen[-1])
    mask = torch.zeros(size)
    mask[chosen] = 1.0
    return mask


@dataclass(frozen=True)
class SparseFedAdam(MomentAveraging):
    client: LocalAdam
    up: Dense | TopK           # Dense(parts=("", "m", "v")) for FedAdam; TopK for the sparse variants
    fairness: bool = False     # Fairness-Top's shared mask (the codec then selects by the "fair" part)
    PARTS: ClassVar[tuple[str, ...]] = MOMENTS

    def start(self, task: Task, received: Params) -> tuple[Params, Params]:
        model, moments = split_parts(received)
        return model, moments | {"step": torch.zeros((), dtype=torch.float64)}

    def finish(self, task: Task, trained: Params, received: Params, stats: dict[str, float],
               opt_state: Params) -> Result:
        result = super().finish(task, trained, received, stats, opt_state)
        if not self.fairness:
            return result
        update, names = result.update, list(trained)
        flat = [torch.from_numpy(flatten_part(update, part, names)) for part in ("",) + MOMENTS]
        mask = fairness_mask(flat, self.up.k(flat[0].numel()))
        scores = unflatten_parts(mask.numpy(), {n: t.shape for n, t in trained.items()}, ("fair",))
        return Result(update | scores, stats)
