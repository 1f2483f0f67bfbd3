"""Participant selection: who is given a task, shared by synchronous rounds and asynchronous dispatch.

A Selector (the class below: every hook with its default) is asked, each round (sync) or each time slots free up
(async), to pick `n_select` devices among the candidates: the devices usable at that instant (online, fitting
memory and battery where those are modelled, not already holding a task). It decides from what a real server could
know, never from the simulator's ground truth:
- `registry`: what each device declared when it registered (its profile's nominal FLOP/s, link rates, latency,
  and its number of samples), and the task time those figures predict; not its capability tier, fluctuating rates
  or future availability;
- `history`: what the server has observed (history.py): each device's tasks and their outcomes, measured task
  durations, reported training losses, when it was seen online;
- `candidates`: who answers now; the deadline, and the clock.
After a round (or an asynchronous aggregation) the selector is told what happened (`observe`); the history has
been updated by then. Selection draws from its own random stream (`rng`), apart from the strategy's, so two
algorithms with the same selector select alike for a seed.

State is explicit, as a Strategy's: the selector object holds its options only (a frozen dataclass), and what it
learns across rounds (a pacer, credits, measured latencies) is a state value the kit holds and hands back:
`init(registry, rounds, clients_per_round) -> state` once, `select(state, ctx, rng) -> (ids, state)` at each
selection, `observe(state, round, now, outcomes, history) -> state` after each round (aggregation). The kit keeps
the state each hook returns and nothing else, and a checkpoint saves that value (protocols/participation.py), so a resumed
run selects as an unbroken one. A hook may return a new value or the one it was given, updated (the built-ins
return new ones: the value a hook was given is left as it was).

The strategy then sets each selected device's task (Strategy.configure, from RoundContext.selected): who trains is
the selector's business, on what terms the strategy's.
"""
from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, ClassVar

import numpy as np

from testbed.selection.history import History, Outcome


@dataclass(frozen=True)
class Registry:
    """What each device declared when it registered, (n,) arrays: its profile's nominal figures, not what it
    will actually deliver (tiers, fluctuating rates and availability stay hidden)."""

    flops_per_s: np.ndarray   # nominal training FLOP/s: peak x efficiency
    down_Bps: np.ndarray
    up_Bps: np.ndarray
    latency_s: np.ndarray
    num_samples: np.ndarray   # training samples
    task_s: np.ndarray        # a full-model task's predicted time from these: download + compute + upload
    # what the server knows of a full-model task itself (its model, codecs and the clients' training work), for
    # selectors that time its phases apart; task_s is latency x 2 + download + compute + upload of these
    bytes_down: float | None = None        # a download's payload
    bytes_up: float | None = None          # an upload's payload
    train_flops: np.ndarray | None = None  # (n,) each device's training FLOPs

    def phases_s(self, devices: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each a full-model task's predicted download (latency included), compute and upload seconds, of these
        devices (default: all, (n,) each)."""
        if self.bytes_down is None or self.bytes_up is None or self.train_flops is None:
            raise ValueError("registry: bytes_down, bytes_up and train_flops are needed to time a task's phases")
        d = slice(None) if devices is None else devices
        return (self.latency_s[d] + self.bytes_down / self.down_Bps[d], self.train_flops[d] / self.flops_per_s[d],
                self.latency_s[d] + self.bytes_up / self.up_Bps[d])

    @property
    def n(self) -> int:
        return len(self.num_samples)


class SelectionContext:
    """One selection: round (sync) or dispatch number (async), the instant, how many to pick, and what the server
    knows. `candidates` is listed on first use (an asynchronous dispatch at 100,000 devices need not list them
    where a selector draws with `usable` or `usable_each`)."""

    def __init__(self, round: int, now: float, n_select: int, registry: Registry, history: History,
                 candidates: Callable[[], np.ndarray], usable: Callable[[int], bool], *,
                 deadline_s: float | None = None, asynchronous: bool = False,
                 probe: Callable[[np.ndarray], np.ndarray] | None = None,
                 usable_each: Callable[[np.ndarray], np.ndarray] | None = None):
        self.round, self.now, self.n_select = round, now, n_select
        self.registry, self.history = registry, history
        self.deadline_s = deadline_s          # the synchronous round's deadline (round.deadline_s), if any
        self.asynchronous = asynchronous      # an asynchronous dispatch (protocol.kind: async)
        self.probe = probe                    # probe(ids) -> each one's loss on the current model, measured and
                                              # charged on the clock (sync rounds only; None otherwise)
        self._candidates, self._usable, self._usable_each = candidates, usable, usable_each

    @cached_property
    def candidates(self) -> np.ndarray:
        """Ids of the devices usable now, increasing."""
        return self._candidates()

    def usable(self, device: int) -> bool:
        """Whether this one device is usable now (a draw by rejection need not list the candidates)."""
        return self._usable(device)

    def usable_each(self, devices: np.ndarray) -> np.ndarray:
        """usable(d) for each of these ids at once, (len,) bool: a batch of draws by rejection."""
        if self._usable_each is None:
            return np.fromiter((self._usable(int(d)) for d in devices), dtype=bool, count=len(devices))
        return self._usable_each(np.asarray(devices, dtype=np.int64))


class Selector(ABC):
    """A participant-selection rule. Subclass it as a frozen dataclass of its options (its fields' annotations are
    what the scenario's `selection.options` are checked against; `__post_init__` may refuse a value), override
    `select`, and whichever hooks differ from the defaults below.

    What it learns across rounds is its state, never its attributes: `init` makes it, `select` and `observe` take
    it and return the next one, and a checkpoint keeps it. A user selector's state is plain data (None, numbers,
    strings, numpy arrays, and lists, tuples and dicts of them): a checkpoint is read back without running code
    from it (testbed/safe_load.py), which builds those and the testbed's own dataclasses only.
    ASYNC: whether it can pick for an asynchronous dispatch (protocol.kind: async), where slots free up one at a
    time and there is no round deadline.
    """

    ASYNC: ClassVar[bool] = True

    def init(self, registry: Registry, rounds: int, clients_per_round: int) -> Any:
        """The state before the first selection, from what the run declares: the devices' registration, the
        rounds (stop.max_rounds; times protocol.edge_rounds in hierarchical aggregation, whose edges each pick
        for every edge round) and K. Default: None (nothing kept)."""
        return None

    @abstractmethod
    def select(self, state: Any, ctx: SelectionContext, rng: np.random.Generator) -> tuple[np.ndarray, Any]:
        """Up to ctx.n_select distinct ids among ctx.candidates, drawing with `rng` (the selection stream); and
        the state after this selection."""

    def needs_deadline(self) -> bool:
        """Whether it picks against the synchronous round's deadline (round.deadline_s) and has none of its own:
        a scenario without round.deadline_s is then refused. Default: no."""
        return False

    def async_refusal(self) -> str | None:
        """Where an ASYNC selector still cannot pick for asynchronous dispatch with these options: the one-line
        reason, naming the option and the fix (the scenario is refused with it). Default: none."""
        return None

    def observe(self, state: Any, round: int, now: float, outcomes: list[Outcome], history: History) -> Any:
        """What happened to the tasks that ended since the last call (a round's, or those an asynchronous
        aggregation closes), with the history already updated; the state after it. Default: the state as it was
        (and the kit then builds no Outcome records: protocols/participation.py's round_ended)."""
        return state


OLD_HOOKS = ("bind", "restore")   # the older interface's own (its `state` is too plain a name to tell by)


def older_interface(cls: type) -> str | None:
    """Why `cls` is written for the older Selector interface (select(ctx, rng) and observe(round, now, outcomes,
    history) changing the selector itself, bind, restore): the hook that shows it; None where nothing does.
    Such a selector is refused (schema/selection.py) rather than adapted: its state would live on the instance,
    out of the kit's sight and of checkpoints."""
    for hook in OLD_HOOKS:
        if hasattr(cls, hook):
            return f"{hook}()"
    for hook, old, new in (("select", 2, 3), ("observe", 4, 5)):
        own = inspect.getattr_static(cls, hook, None)
        if inspect.isfunction(own) and not _takes(own, new) and _takes(own, old):
            return f"{hook}{inspect.signature(own)}"
    return None


def _takes(function, n: int) -> bool:
    """Whether `function`(self, ...) can be called with n positional arguments after self."""
    try:
        inspect.signature(function).bind(*range(n + 1))
        return True
    except TypeError:
        return False


def select_uniform(online: np.ndarray, n_select: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform sample without replacement among the online devices, in increasing id order."""
    size = min(n_select, len(online))
    if len(online) <= 1:   # numpy's choice among one draws nothing: the same id (a copy), the stream as it is
        return np.asarray(online)[:size].copy()
    return np.sort(rng.choice(online, size=size, replace=False))
