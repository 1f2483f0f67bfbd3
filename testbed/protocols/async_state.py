"""What an asynchronous server (asynchronous.py) carries from one instant to the next, as one dataclass.

Semantics:
- `AsyncState` is everything the server keeps besides its model (the kit's ServerState, saved as a checkpoint's
  `state`) and what the kit keeps itself (the history, the selector's state, shared links' pending rows): the
  model's version, the tasks in flight, the arrived updates not yet aggregated, the models the tasks in flight
  started from, what happened since the last aggregation (`Window`), and the counters and alarms that place the
  next dispatch and aggregation. Nothing in it is derived from anything else in it, except `received`, which is
  trimmed to what `in_flight` and `buffer` need after each aggregation.
- It never changes: the functions below return the next state (a task ended, a dispatch, a tick, a wake), as a
  Strategy's aggregate does, and the server (asynchronous.py) holds the latest; a checkpoint keeps one value.
- A checkpoint saves it whole, as `protocol["server"]`, and a resumed run restores it whole (an older testbed's
  checkpoint through testbed/migrations.py).
- The classes here are plain dataclasses, which checkpoints may unpickle (safe_load.py's allow-list).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from testbed.algorithms.base import Task
from testbed.clock import TaskPlan, Timeline


@dataclass(frozen=True)
class InFlight:
    """A task dispatched and not yet ended, as planned at its dispatch (or planned again, through shared links)."""

    task: Task
    timeline: Timeline
    plan: TaskPlan
    version: int               # the model version it downloaded
    number: int                # the run's tasks numbered from 1, in order of dispatch (ties: device order)
    battery_cut: bool = False  # its device drops when its battery empties, before its on-interval ends


@dataclass(frozen=True)
class Window:
    """What happened since the last aggregation: tasks started, and tasks that ended without being buffered."""

    t_start: float
    selected: int = 0
    ended: list[tuple[InFlight, str]] = field(default_factory=list)   # (task, dropped | stale)


@dataclass(frozen=True)
class AsyncState:
    """The server's state besides its model: saved whole, restored whole (see the module's docstring)."""

    window: Window                   # since the last aggregation
    version: int = 0                 # the model's version: aggregations so far
    in_flight: dict[int, InFlight] = field(default_factory=dict)    # by device: a device holds one task at most
    buffer: list[tuple[InFlight, int]] = field(default_factory=list)  # (task, staleness) arrived, to aggregate
    received: dict[int, dict] = field(default_factory=dict)  # version -> {down codec: the model as delivered}
    dispatches: int = 0              # configure calls so far: the training stream's "round"
    started: int = 0                 # tasks started so far: the next one's number is started + 1
    next_tick: int = 1               # the next period aggregation is at next_tick * period_s
    wake_at: float | None = None     # when free slots look for devices again, where none could take one


def task_ended(state: AsyncState, task: InFlight, outcome: str, max_staleness: int | None) -> tuple[AsyncState, bool]:
    """`task` ended (`outcome`: arrived | dropped): out of the tasks in flight; an arrival at most `max_staleness`
    versions old (None: any) into the buffer with its staleness, anything else into the window's ended (dropped |
    stale). The next state, and whether the task was buffered."""
    in_flight = dict(state.in_flight)
    del in_flight[task.task.device]
    tau = state.version - task.version
    if outcome == "dropped" or (max_staleness is not None and tau > max_staleness):
        why = "dropped" if outcome == "dropped" else "stale"
        window = replace(state.window, ended=[*state.window.ended, (task, why)])
        return replace(state, in_flight=in_flight, window=window), False
    return replace(state, in_flight=in_flight, buffer=[*state.buffer, (task, tau)]), True


def dispatched(state: AsyncState, flights: list[InFlight], replanned: list[InFlight], models: dict) -> AsyncState:
    """One dispatch (the next configure call): `flights` started (numbered from state.started + 1), `replanned`
    the tasks in flight with their plans made again (shared links), `models` the current version's models as
    delivered through the downlink codecs (those delivered before included)."""
    return replace(state, dispatches=state.dispatches + 1, started=state.started + len(flights),
                   in_flight={**state.in_flight, **{f.task.device: f for f in [*replanned, *flights]}},
                   received={**state.received, state.version: models},
                   window=replace(state.window, selected=state.window.selected + len(flights)))


def ticked(state: AsyncState) -> AsyncState:
    """The periodic aggregation at next_tick * period_s is due: the next tick is set one period on."""
    return replace(state, next_tick=state.next_tick + 1)


def waking_at(state: AsyncState, t: float | None) -> AsyncState:
    """Free slots look for devices again at t (None: no wake is awaited)."""
    return replace(state, wake_at=t)
