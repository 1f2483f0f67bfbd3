"""What every algorithm speaks: tasks out, arrivals and failures back, explicit server state.

A Strategy (the class below: every hook with its default) is a frozen dataclass of hyper-parameters, after
Flower's configure/aggregate with explicit failures: configure(state, ctx, rng) -> tasks; on each device start ->
the local optimizer (`client`) on objective -> finish -> Result; aggregate(state, round, arrivals, failures).
Executors own the training loops (testbed/local.py), so a strategy is written once for all of them.
Per-device state (importance scores, bandit agents, personal models) lives in ServerState.clients, keyed by
device id: the server's copy of what each device keeps. What a device keeps between rounds never travels, so it
costs no bytes; what it uploads goes through its codec.
"""
from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import numpy as np
import torch

from testbed.clock import Timeline  # re-exported: plugin authors import it from here
from testbed.functional import LossFn, Params  # re-exported: strategies and user code import them from here
from testbed.payload import Dense, UnitMasked
from testbed.selection.base import select_uniform  # noqa: F401 - re-exported for user code

if TYPE_CHECKING:  # what a Build holds; imported for the annotations only, so the interface loads light
    from testbed.data.server import SharedData
    from testbed.local import LocalSGD
    from testbed.submodel import SubmodelCosts


@dataclass(frozen=True)
class ServerState:
    params: Params
    optimizer: dict[str, Params] = field(default_factory=dict)  # server optimizer moments, by name
    clients: MutableMapping[int, dict] = field(default_factory=dict)  # per-device state (a ClientStore may spill)


@dataclass(frozen=True)
class RoundContext:
    """What the server may look at when it plans a round."""

    round: int
    online: np.ndarray        # ids of the devices usable at round start (the selection's candidates)
    n_select: int             # how many were to be picked (over-commit included)
    num_samples: np.ndarray   # training samples of every device
    fleet: Any                # devices.Fleet: profiles, tiers, availability (P-UCBV reads it)
    strategy_rng: np.random.Generator | None = None   # the strategy's own draws (ratios, masks), apart from
                                                      # selection's, so that methods select alike for a seed
    ratio_cap: np.ndarray | None = None   # (n,) the largest submodel ratio each device holds in memory (None: any)
    selected: np.ndarray | None = None   # the devices the scenario's selection picked (testbed/selection/),
                                         # increasing: one task each; None: every one of `online`

    def __post_init__(self):
        if self.selected is None:
            if self.n_select < len(self.online):
                raise ValueError("RoundContext: give `selected` where fewer than the online devices are picked")
            object.__setattr__(self, "selected", np.sort(self.online))


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


@dataclass(frozen=True)
class Build:
    """What a strategy is built from: the scenario's pieces that are not the algorithm's own options."""

    client: LocalSGD             # the local optimizer of the scenario's `client:` section
    down: Dense                  # the downlink and uplink codecs of its `codec:` section
    up: Dense
    rounds: int                  # stop.max_rounds
    clients_per_round: int       # K: the updates an aggregation waits for
    fleet_size: int
    costs: SubmodelCosts         # the model's prunable units and submodel FLOPs
    shared: SharedData | None = None   # the server's own data (data.server)
    initial_accuracy: Callable[[], np.ndarray] | None = None  # each device's accuracy of the initial model on its
                                                              # training data (P-UCBV's a_k^{-1}), measured on demand


class Strategy(ABC):
    """An algorithm: its server side and what its devices do. Subclass it as a frozen dataclass of hyper-parameters
    (its repr is its config, and it pickles for Ray), override `aggregate` and whichever hooks differ from the
    defaults below, which make plain FedAvg-style training: uniform selection, the model down, SGD on the
    cross-entropy, the model delta up. Executors own the training loops (testbed/local.py), so a strategy is
    written once for all of them. The defaults of configure and create use the fields `client`, `down` and `up`.

    Class attributes say what the algorithm needs of a scenario (checked when it is validated):
    ASYNC: the asynchronous rules it runs under (protocol.kind: async): "buffered" (FedBuff: staleness-weighted
    updates through aggregate) and "mixing" (FedAsync's x <- (1 - a) x + a x_new, for a server that adds the update
    as it is); empty: it needs a round's participants together and runs synchronously only.
    NEEDS_LOCAL_STEPS: it counts its local steps (client.local_steps must be set).
    NEEDS_SERVER_DATA: it trains on the server's own data (data.server must be set; Build.shared holds it).
    SERVER_ON_DEVICE: its server side (init, configure, broadcast, aggregate, personal_models) and its device
    hooks (start, finish) are tensor arithmetic that runs on whichever device the model's tensors are on, so with
    executor.device: cuda the server keeps the model, its optimizer state and the arrivals there
    (testbed/execution/placement.py); False (the default): they get CPU tensors, as on a CPU-only run.
    """

    ASYNC: ClassVar[frozenset[str]] = frozenset()
    NEEDS_LOCAL_STEPS: ClassVar[bool] = False
    NEEDS_SERVER_DATA: ClassVar[bool] = False
    SERVER_ON_DEVICE: ClassVar[bool] = False

    @classmethod
    def create(cls, build: Build, **options) -> Strategy:
        """The strategy of a run whose scenario names this class (algorithm.options are the keyword `options`).
        Default: the constructor, given `client`, `down` and `up` from the build where it takes them."""
        takes = inspect.signature(cls).parameters
        pieces = {"client": build.client, "down": build.down, "up": build.up}
        return cls(**{k: v for k, v in pieces.items() if k in takes and k not in options}, **options)

    # ---- the server ----------------------------------------------------------------------------------------
    def init(self, params: Params) -> ServerState:
        """The server's state before round 1, from the initial model."""
        return ServerState(params)

    def configure(self, state: ServerState, ctx: RoundContext, rng: np.random.Generator) -> list[Task]:
        """The tasks of this round (dispatch): one for each device the selection picked (ctx.selected), training
        as the `client` section says, with the `down` and `up` codecs. `rng` is the selection stream, which the
        selection has drawn from already: a strategy draws from ctx.strategy_rng."""
        return [task_for(d, ctx, self.client, self.down, self.up) for d in ctx.selected]

    def broadcast(self, state: ServerState) -> Params:
        """What the server sends each device, before its downlink codec: the model (FedAdam-SSM adds moments)."""
        return state.params

    @abstractmethod
    def aggregate(self, state: ServerState, round: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict[str, float]]:
        """The next state from the updates that arrived (as the server decoded them) and the devices that failed
        (dropped, late or surplus); and the round's metrics (train_loss, server_flops: the server's own work)."""

    def personal_models(self, state: ServerState) -> dict[int, Params]:
        """Devices' own models, evaluated on their own test data instead of the global one (FedLPS's sparse
        models); none by default."""
        return {}

    # ---- a device ------------------------------------------------------------------------------------------
    def start(self, task: Task, received: Params) -> tuple[Params, Params | None]:
        """What the device trains from, and its optimizer's starting state (None: fresh), given what it received
        and what it kept (task.local: FedLPS's scores, FAdamGT's moments). Default: the model as received."""
        return received, None

    def objective(self, loss_fn: LossFn) -> Callable[..., tuple[torch.Tensor, dict]]:
        """What a device minimises: (params, anchor, x, y, extras) -> (loss, metrics of the batch), where anchor
        is the model received and extras the task's. Default: the cross-entropy of loss_fn."""

        def objective(params, anchor, x, y, extras):
            loss, accuracy = loss_fn(params, x, y)
            return loss, {"accuracy": accuracy}

        return objective

    def finish(self, task: Task, trained: Params, received: Params, stats: dict[str, float],
               opt_state: Params) -> Result:
        """What the device sends back (before its uplink codec) and keeps. Default: the model delta, no state."""
        return Result({n: trained[n] - received[n] for n in received}, stats)


def task_for(device: int, ctx: RoundContext, client: Any, down, up, **terms) -> Task:
    """The task of `device` this round: its samples, what the local optimizer's schedule makes it process (its
    FLOPs follow from that), its codecs, and any further terms (ratio, forward_flops, extras, local)."""
    n = int(ctx.num_samples[device])
    return Task(int(device), ctx.round, n, client.samples_processed(n), down, up, **terms)


def _device(tensors: list[Params]) -> torch.device:
    """Where the tensors live (the server's device: testbed/execution/placement.py)."""
    return next(iter(tensors[0].values())).device


def weighted_mean(tensors: list[Params], weights: list[float]) -> Params:
    w = torch.tensor(weights, dtype=torch.float32, device=_device(tensors))
    w = w / w.sum()
    return {name: torch.tensordot(w, torch.stack([t[name] for t in tensors]), dims=1) for name in tensors[0]}


def holder_mean(tensors: list[Params], held: list[Params], weights: list[float]) -> Params:
    """Entry by entry, the weighted mean over the tensors that hold the entry (held: 0/1 masks by name; a name
    without a mask is held whole); 0 where nobody holds it. HeteroFL's aggregation of submodel updates."""
    w = torch.tensor(weights, dtype=torch.float32, device=_device(tensors))
    out = {}
    for name in tensors[0]:
        masks = torch.stack([torch.ones_like(t[name]) if name not in h else h[name].expand_as(t[name])
                             for t, h in zip(tensors, held)])
        total = torch.tensordot(w, masks * torch.stack([t[name] for t in tensors]), dims=1)
        count = torch.tensordot(w, masks, dims=1)
        out[name] = torch.where(count > 0, total / count.clamp_min(1e-30), torch.zeros_like(total))
    return out
