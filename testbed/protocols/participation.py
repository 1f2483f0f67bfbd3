"""Who is picked and what they are asked to do: a part of the kit (kit.py) holding the server's record of the devices.

Semantics:
- `select` asks the scenario's selector (testbed/selection/) for up to n_select distinct ids among the candidates,
  from what the server has observed (`history`) and its own state (`selector_state`, which each of its hooks
  returns, checked by contracts.py); ids increasing. It draws from the run's selection stream.
- `configure` asks the strategy for the picked devices' tasks (checked by contracts.py); it records nothing.
  The protocol then tells the history what it dispatched (`dispatched`), once the tasks are the ones that run.
- The history learns what the server sees and nothing else: who was listed online at an instant (`looked`), the
  tasks dispatched (`dispatched`), and the tasks that ended, with their outcomes (`ended`, or `round_ended` for a
  synchronous round's tasks given column by column); the selector is told of ended tasks through its `observe`.
- `kept()` is what a checkpoint holds of it (the history and the selector's state, checked as plain data), and
  `resume(saved)` restores it (an older testbed's selector attributes: testbed/migrations.py).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

import devices
from testbed import migrations
from testbed.algorithms.base import RoundContext, ServerState, Strategy, Task
from testbed.contracts import Contracts
from testbed.resources import Resources
from testbed.schema.scenario import Scenario
from testbed.selection import History, Outcome, SelectionContext, Selector

NO_METRICS: dict = {}   # a task's report where the server trained none: read, never written


class Participation:
    """The selector, its state and the history; the strategy's configure. `selection` and `strategy_rng`: the
    run's streams (the kit restores them from a checkpoint), `registry`: what the selector may know of each
    device beforehand (protocols/registry.py)."""

    def __init__(self, scenario: Scenario, fleet: devices.Fleet, strategy: Strategy, selector: Selector,
                 registry, contracts: Contracts, selection: np.random.Generator, strategy_rng: np.random.Generator,
                 num_samples: np.ndarray, resources: Resources):
        self.scenario, self.fleet, self.strategy, self.selector = scenario, fleet, strategy, selector
        self.registry, self.contracts = registry, contracts
        self.selection, self.strategy_rng = selection, strategy_rng
        self._num_samples, self._resources = num_samples, resources
        self.history = History.empty(fleet.n)
        self.selector_state = selector.init(registry, scenario.selection_rounds, scenario.clients_per_round)
        self._observes = type(selector).observe is not Selector.observe   # see round_ended

    # ---- checkpoints -------------------------------------------------------------------------------------
    def saved(self) -> dict:
        """Its entry in a checkpoint: the history and the selector's state."""
        return {"history": self.history, "state": self.contracts.checkpointable(self.selector_state)}

    def resume(self, saved: dict) -> None:
        """Go on from its entry in a checkpoint (`saved()`'s, or an older testbed's)."""
        self.history = saved["history"]
        self.selector_state = migrations.selector_state(saved, self.selector_state, self.contracts.selector)

    # ---- who is picked -----------------------------------------------------------------------------------
    def select(self, r: int, now: float, n_select: int, candidates: Callable[[], np.ndarray],
               usable: Callable[[int], bool], *, asynchronous: bool = False, probe=None,
               usable_each: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
        """The selector's pick for round (dispatch) r at `now`: up to n_select distinct ids among the candidates
        (listed by `candidates()` where the selector asks; `usable(d)`: one device's answer, `usable_each(ids)`:
        several at once), increasing."""
        deadline = None if asynchronous else self.scenario.round.deadline_s
        ctx = SelectionContext(r, now, n_select, self.registry, self.history, candidates, usable,
                               deadline_s=deadline, asynchronous=asynchronous, probe=probe, usable_each=usable_each)
        answer = self.selector.select(self.selector_state, ctx, self.selection)
        picked, self.selector_state = self.contracts.selected(answer, self.selector_state, ctx)
        return picked

    def configure(self, state: ServerState, r: int, candidates: np.ndarray, n_select: int,
                  selected: np.ndarray) -> list[Task]:
        """The strategy's tasks for round (dispatch) r, one for each selected device; the candidates and how many
        were to be picked are the strategy's to read."""
        ctx = RoundContext(r, candidates, n_select, self._num_samples, self.fleet, self.strategy_rng,
                           self._resources.ratio_cap, selected)
        return self.contracts.tasks(self.strategy.configure(state, ctx, self.selection), ctx)

    # ---- what the server sees ------------------------------------------------------------------------------
    def dispatched(self, tasks: list[Task], r: int) -> None:
        """These tasks of round (dispatch) r were sent: into the history."""
        self.history.dispatched(np.fromiter((t.device for t in tasks), np.int64, len(tasks)), r)

    def looked(self, online: np.ndarray, now: float) -> None:
        """The server listed who is online at `now`: the history's availability record."""
        self.history.looked(online, now)

    def ended(self, r: int, now: float, outcomes: list[Outcome]) -> None:
        """Tasks that ended, as the server saw them, in round (aggregation) r: into the history, then the
        selector is told."""
        self.history.record(outcomes)
        self._observe(r, now, outcomes)

    def round_ended(self, r: int, now: float, t0: float, devices: list[int], outcomes: list[str],
                    ended_s: list[float], metrics: dict[int, dict]) -> None:
        """`ended` for synchronous round r's tasks, all dispatched at t0, given column by column (each device, its
        outcome and end, in device order; `metrics`: the trained ones' reports): the Outcome records are made only
        for a selector whose observe reads them (the base one does not: a thousand a round were ~8% of the
        engine's round at 100,000 devices, benchmarks/scale.py)."""
        n = len(devices)
        self.history.record_columns(devices, [r] * n, outcomes, [t0] * n, ended_s,
                                    [metrics.get(d, NO_METRICS) for d in devices])
        if self._observes:
            self._observe(r, now, [Outcome(d, r, outcome, t0, end, metrics.get(d, {}))
                                   for d, outcome, end in zip(devices, outcomes, ended_s)])

    def _observe(self, r: int, now: float, outcomes: list[Outcome]) -> None:
        told = self.selector.observe(self.selector_state, r, now, outcomes, self.history)
        self.selector_state = self.contracts.observed(told, self.selector_state, r)   # the state it returns
