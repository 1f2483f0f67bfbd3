"""What every algorithm speaks: tasks out, arrivals and failures back, explicit server state.

A Strategy is a frozen dataclass of hyper-parameters (its repr is its config, and it pickles for Ray) with
four verbs, after Flower's configure/aggregate with explicit failures:
    init(params) -> ServerState
    configure(state, ctx, rng) -> list[Task]              # who trains, on what terms (the server sees the fleet)
    client_update(task, params, x, y, loss_fn, rng) -> (update, metrics)   # pure: runs on any executor
    aggregate(state, round, arrivals, failures) -> (ServerState, metrics)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np
import torch

from testbed.payload import Dense

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
    down: Dense              # codec of the model sent to the device
    up: Dense                # codec of the update it sends back


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
    def init(self, params: Params) -> ServerState: ...
    def configure(self, state: ServerState, ctx: RoundContext, rng: np.random.Generator) -> list[Task]: ...
    def client_update(self, task: Task, params: Params, x: torch.Tensor, y: torch.Tensor, loss_fn: LossFn,
                      rng: np.random.Generator) -> tuple[Params, dict[str, float]]: ...
    def aggregate(self, state: ServerState, round: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict[str, float]]: ...


def select_uniform(online: np.ndarray, n_select: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform sample without replacement among the online devices, in increasing id order."""
    return np.sort(rng.choice(online, size=min(n_select, len(online)), replace=False))


def weighted_mean(tensors: list[Params], weights: list[float]) -> Params:
    total = float(sum(weights))
    return {name: sum(w / total * t[name] for t, w in zip(tensors, weights)) for name in tensors[0]}
