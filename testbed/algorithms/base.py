"""What every algorithm speaks: tasks out, arrivals and failures back, explicit server state.

A Strategy is a frozen dataclass of hyper-parameters (its repr is its config, and it pickles for Ray), after
Flower's configure/aggregate with explicit failures:
    init(params) -> ServerState
    configure(state, ctx, rng) -> list[Task]              # who trains, on what terms (the server sees the fleet)
    client                                                # the local optimizer: schedule and pure update rule
    objective(loss_fn) -> (params, anchor, x, y, extras) -> (loss, aux)   # what a device minimises
    finish(task, trained, received, stats, opt_state) -> Result       # what a device sends back, and keeps
    aggregate(state, round, arrivals, failures) -> (ServerState, metrics)
    optional hooks:
    broadcast(state) -> tensors              # what the server sends (default: the model; FedAdam adds its moments)
    start(task, received) -> (params, opt_state)   # on the device: what it trains from, with what it kept
                                             # (default: the model as received, a fresh optimizer)
    personal_models(state) -> {device: params}     # devices' own models, evaluated on their own test data
Executors own the training loops (testbed/local.py), so a strategy is written once for all of them.
Per-device state (importance scores, bandit agents, personal models) lives in ServerState.clients, keyed by
device id: the server's copy of what each device keeps. What a device keeps between rounds never travels, so it
costs no bytes; what it uploads goes through its codec.
"""
from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np
import torch

from testbed.clock import Timeline  # re-exported: plugin authors import it from here
from testbed.payload import Dense, UnitMasked

Params = dict[str, torch.Tensor]
LossFn = Callable[[Params, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]  # -> (loss, accuracy)


@dataclass(frozen=True)
class ServerState:
    params: Params
    optimizer: dict[str, Params] = field(default_factory=dict)  # server optimizer moments, by name
    clients: MutableMapping[int, dict] = field(default_factory=dict)  # per-device state (a ClientStore may spill)


@dataclass(frozen=True)
class RoundContext:
    """What the server may look at when it plans a round."""

    round: int
    online: np.ndarray        # ids of the devices online at round start
    n_select: int             # how many to pick (over-commit included)
    num_samples: np.ndarray   # training samples of every device
    fleet: Any                # devices.Fleet: profiles, tiers, availability (P-UCBV reads it)
    strategy_rng: np.random.Generator | None = None   # the strategy's own draws (ratios, masks), apart from
                                                      # selection's, so that methods select alike for a seed
    ratio_cap: np.ndarray | None = None   # (n,) the largest submodel ratio each device holds in memory (None: any)


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
    extras: dict = field(default_factory=dict)  # per-client tensors the objective reads, e.g. a mask
    local: Params = field(default_factory=dict)  # what the device kept from earlier rounds (FedLPS's importance
                                                 # scores, FAdamGT's moments): never on the wire; start() uses it


@dataclass(frozen=True)
class Result:
    """What a device's training produced."""

    update: Params                    # what it uploads, before encoding
    metrics: dict[str, float]
    local_state: dict | None = None   # what it keeps for later rounds (stored in ServerState.clients)
    up: Any = None                    # the codec it uploads with, when its pattern is known only after training
                                      # (FedLPS's learned mask); its size must equal the planned task.up's


@dataclass(frozen=True)
class Arrival:
    device: int
    num_samples: int
    update: Params           # as the server decoded it
    metrics: dict[str, float]
    local_state: dict | None = None
    timeline: Timeline | None = None   # what the task cost the device (P-UCBV's T_k, FedMP's round time)
    task: Task | None = None           # what the server asked of it (its ratio, the submodel it sent)


@dataclass(frozen=True)
class Failure:
    device: int
    reason: str              # dropped | late | surplus


class Strategy(Protocol):
    client: Any  # the local optimizer, e.g. testbed.local.LocalSGD

    def init(self, params: Params) -> ServerState: ...
    def configure(self, state: ServerState, ctx: RoundContext, rng: np.random.Generator) -> list[Task]: ...
    def objective(self, loss_fn: LossFn) -> Callable[..., torch.Tensor]: ...
    def finish(self, task: Task, trained: Params, received: Params, stats: dict[str, float],
               opt_state: Params) -> Result: ...
    def aggregate(self, state: ServerState, round: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict[str, float]]: ...


def task_for(device: int, ctx: RoundContext, client: Any, down, up, **terms) -> Task:
    """The task of `device` this round: its samples, what the local optimizer's schedule makes it process (its
    FLOPs follow from that), its codecs, and any further terms (ratio, forward_flops, extras, local)."""
    n = int(ctx.num_samples[device])
    return Task(int(device), ctx.round, n, client.samples_processed(n), down, up, **terms)


def select_uniform(online: np.ndarray, n_select: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform sample without replacement among the online devices, in increasing id order."""
    return np.sort(rng.choice(online, size=min(n_select, len(online)), replace=False))


def weighted_mean(tensors: list[Params], weights: list[float]) -> Params:
    w = torch.tensor(weights, dtype=torch.float32)
    w = w / w.sum()
    return {name: torch.tensordot(w, torch.stack([t[name] for t in tensors]), dims=1) for name in tensors[0]}


def holder_mean(tensors: list[Params], held: list[Params], weights: list[float]) -> Params:
    """Entry by entry, the weighted mean over the tensors that hold the entry (held: 0/1 masks by name; a name
    without a mask is held whole); 0 where nobody holds it. HeteroFL's aggregation of submodel updates."""
    w = torch.tensor(weights, dtype=torch.float32)
    out = {}
    for name in tensors[0]:
        masks = torch.stack([torch.ones_like(t[name]) if name not in h else h[name].expand_as(t[name])
                             for t, h in zip(tensors, held)])
        total = torch.tensordot(w, masks * torch.stack([t[name] for t in tensors]), dims=1)
        count = torch.tensordot(w, masks, dims=1)
        out[name] = torch.where(count > 0, total / count.clamp_min(1e-30), torch.zeros_like(total))
    return out
