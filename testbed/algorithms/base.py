"""What every algorithm speaks: tasks out, arrivals and failures back, explicit server state.

A Strategy is a frozen dataclass of hyper-parameters (its repr is its config, and it pickles for Ray), after
Flower's configure/aggregate with explicit failures:
    init(params) -> ServerState
    configure(state, ctx, rng) -> list[Task]              # who trains, on what terms (the server sees the fleet)
    client                                                # the local optimizer: schedule and pure update rule
    objective(loss_fn) -> (params, anchor, x, y, extras) -> loss    # what a device minimises; anchor = model received
    finish(task, trained, received, mean_loss, opt_state) -> (update, metrics)   # what a device sends back
    aggregate(state, round, arrivals, failures) -> (ServerState, metrics)
Executors own the training loops (testbed/local.py), so a strategy is written once for all of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np
import torch

from testbed.payload import Dense, UnitMasked

Params = dict[str, torch.Tensor]
LossFn = Callable[[Params, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class ServerState:
    params: Params
    optimizer: dict[str, Params] = field(default_factory=dict)  # server optimizer moments, by name


@dataclass(frozen=True)
class RoundContext:
    """What the server may look at when it plans a round."""

    round: int
    online: np.ndarray        # ids of the devices online at round start
    n_select: int             # how many to pick (over-commit included)
    num_samples: np.ndarray   # training samples of every device
    fleet: Any                # devices.Fleet: profiles, tiers, availability (P-UCBV reads it)


@dataclass(frozen=True)
class Task:
    device: int
    round: int
    num_samples: int
    samples_processed: int   # what the device trains on: epochs x samples; its FLOPs follow from it
    down: Dense | UnitMasked  # codec of the model sent to the device
    up: Dense | UnitMasked    # codec of the update it sends back
    ratio: float | None = None            # the device's sparse ratio this round (submodel methods)
    forward_flops: int | None = None      # forward multiply-adds per sample of its submodel (None: the model's)
    extras: dict = field(default_factory=dict)  # per-client tensors for its training, e.g. an update_mask


@dataclass(frozen=True)
class Arrival:
    device: int
    num_samples: int
    update: Params           # as the server decoded it
    metrics: dict[str, float]


@dataclass(frozen=True)
class Failure:
    device: int
    reason: str              # dropped | late | surplus


class Strategy(Protocol):
    client: Any  # the local optimizer, e.g. testbed.local.LocalSGD

    def init(self, params: Params) -> ServerState: ...
    def configure(self, state: ServerState, ctx: RoundContext, rng: np.random.Generator) -> list[Task]: ...
    def objective(self, loss_fn: LossFn) -> Callable[..., torch.Tensor]: ...
    def finish(self, task: Task, trained: Params, received: Params, mean_loss: float,
               opt_state: Params) -> tuple[Params, dict[str, float]]: ...
    def aggregate(self, state: ServerState, round: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict[str, float]]: ...


def select_uniform(online: np.ndarray, n_select: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform sample without replacement among the online devices, in increasing id order."""
    return np.sort(rng.choice(online, size=min(n_select, len(online)), replace=False))


def weighted_mean(tensors: list[Params], weights: list[float]) -> Params:
    w = torch.tensor(weights, dtype=torch.float32)
    w = w / w.sum()
    return {name: torch.tensordot(w, torch.stack([t[name] for t in tensors]), dims=1) for name in tensors[0]}
