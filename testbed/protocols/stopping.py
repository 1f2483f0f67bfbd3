"""When a run stops and when it keeps a checkpoint: the rules every protocol asks of its kit's `stop` (kit.py),
read off the scenario's `stop` and `checkpoint` sections, the run's early end where no device can train again,
and a stop asked for by the run's on_round callbacks (the Python API's `on_round=`, testbed/hooks.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from testbed.errors import TestbedError
from testbed.schema.scenario import Scenario


@dataclass(frozen=True)
class Ending:
    """How a played run ended, besides its rows: the reason its on_round callbacks gave to stop it, when no device
    could train again (and when the first would have), and the plugins that handed out no task in a round
    (their 'reference.hook (file:line)'); summary.json says each (testbed/degenerate.py's ending_facts)."""

    stop_reason: str | None = None
    ran_out_at: float | None = None
    first_usable_s: float | None = None
    no_task_from: tuple[str, ...] = ()


class StopRules:
    """The rules of one run's `scenario`; `ask`: its on_round callbacks, a reason to stop or None. It records how
    the run ended early (`ending`)."""

    def __init__(self, scenario: Scenario, ask: Callable[[dict], str | None] | None = None):
        self.scenario, self.ask = scenario, ask
        self.ran_out_at: float | None = None        # see ran_out_of_devices
        self.first_usable_s: float | None = None
        self.stop_reason: str | None = None         # the reason the callbacks gave, where they asked to stop

    def ending(self, no_task_from: tuple[str, ...] = ()) -> Ending:
        """How the run ended, as recorded, with the plugins that handed out no task (contracts.py)."""
        return Ending(self.stop_reason, self.ran_out_at, self.first_usable_s, no_task_from)

    def asked_to_stop(self, row: dict) -> bool:
        """Show the on_round callbacks a round's (aggregation's) row before it is written: whether they ask the run
        to end after it (their reason kept in stop_reason). Called for every row, the run's last included."""
        if self.ask is None:
            return False
        reason = self.ask(row)
        if reason is not None:
            self.stop_reason = reason
        return reason is not None

    def ran_out_of_devices(self, t: float, first_usable_s: float | None = None) -> None:
        """The run ends at t, before its stop, because no device will be able to train again, or (a synchronous
        run that waited for its first usable device at `first_usable_s`) not before stop.max_sim_time_s: kept
        for summary.json and a warning (testbed/degenerate.py)."""
        self.ran_out_at, self.first_usable_s = t, first_usable_s

    def out_of_time(self, t: float) -> bool:
        """Whether the simulated clock has reached stop.max_sim_time_s: no round starts, the run ends."""
        limit = self.scenario.stop.max_sim_time_s
        return limit is not None and t >= limit

    def is_last(self, r: int) -> bool:
        """Whether round (aggregation) r is stop.max_rounds."""
        return r == self.scenario.stop.max_rounds

    def reached_target(self, scores: dict[str, float]) -> bool:
        """Whether these scores stop the run: stop.stop_at_target, and accuracy at or above the target."""
        stop = self.scenario.stop
        return stop.stop_at_target and stop.target_accuracy is not None and \
            scores.get("accuracy", 0.0) >= stop.target_accuracy

    def checkpoint_due(self, saved: int, r: int) -> bool:
        """Whether round (aggregation) r passed a multiple of checkpoint.every_rounds since the last checkpoint,
        at round `saved`."""
        every = self.scenario.checkpoint.every_rounds
        return r // every > saved // every

    @staticmethod
    def check_finite(r: int, metrics: dict, scores: dict[str, float]) -> None:
        """A diverged model stops the run, its rows written by now: a NaN or infinite mean training loss of the
        arrivals (0 in a round nobody reached) or test loss (0 in a round without evaluation)."""
        for what, value in (("training loss", metrics.get("train_loss", 0.0)), ("test loss", scores.get("loss", 0.0))):
            if not math.isfinite(value):
                raise TestbedError(f"round {r}: the model diverged ({what} {value}); "
                                   "lower client.lr or the server learning rate")
