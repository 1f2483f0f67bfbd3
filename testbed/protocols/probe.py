"""A synchronous round's probe: candidates asked for their loss on the current global model before the round's
tasks go out (SelectionContext.probe; power-of-choice's pow-d, Cho et al. 2022), charged on the clock.

Semantics. At the round's start t0 each probed device
- downloads the model: latency + the downlink codec's bytes / its down_Bps;
- computes its loss over all its training samples: forward FLOPs per sample x samples, at its FLOP/s at the
  round's capability tier (a forward pass only, no backward);
- uploads the loss: latency + PROBE_BYTES / its up_Bps.
These three phases are planned as a task's (testbed/clock.py): a device that goes offline (or whose battery
empties) before its upload ends gives no answer, its loss NaN, and the selector may not pick it. The round's
tasks are dispatched when the last probe ends (an answer, or a drop the server sees as a lost connection); the
round keeps t0 as its start, so its span includes the probe. The probe's bytes (bytes_down, bytes_up) and FLOPs
count in rounds.csv, those of a probe that gave no answer as wasted; its phases are rows of events.csv with
outcome "probe", and drain batteries like any phase.
The loss is real: the global model the server holds, evaluated on the device's training samples in order (mean
cross-entropy, testbed.execution.evaluate), deterministic. Deviation: a lossy downlink codec's rounding of the
probed model is not applied to the loss.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from testbed.clock import Phase, TaskPlan, Timeline
from testbed.errors import TestbedError

PROBE_BYTES = 4  # the loss, one float32


@dataclass
class Probe:
    """One round's probe, planned at t0: `plan(ids)` gives each device's (timeline, plan), `loss(d)` its loss on
    the current model. Called at most once (by the selector); what it did is read back by the protocol."""

    t0: float
    plan: Callable[[np.ndarray], dict[int, tuple[Timeline, TaskPlan]]]
    loss: Callable[[int], float]
    probed: dict[int, tuple[Timeline, TaskPlan]] = field(default_factory=dict)
    called: bool = False

    def __call__(self, ids) -> np.ndarray:
        """Each device's loss on the current model; NaN where it went offline before its answer arrived."""
        if self.called:
            raise TestbedError("selection: the probe was called twice in one round; probe every candidate at once")
        self.called = True
        ids = np.asarray(ids, dtype=np.int64)
        self.probed = self.plan(ids)
        return np.array([self.loss(d) if self.probed[d][1].outcome == "arrived" else math.nan
                         for d in ids.tolist()], dtype=np.float64)

    @property
    def steps(self) -> tuple[float, ...]:
        """The clock's steps from t0 to the dispatch: the last-ending probe's phases one by one (the additions
        that planned its end, so the clock lands on it exactly); none where nothing was probed."""
        if not self.probed:
            return ()
        last = max(self.probed.values(), key=lambda tp: tp[1].end_s)[1]
        return tuple(p.delay_s for p in last.phases)

    @property
    def phases(self) -> list[tuple[Phase, Timeline, bool]]:
        """Every probe phase, by device, with its timeline and whether it was wasted (no answer)."""
        return [(p, timeline, plan.outcome != "arrived") for d, (timeline, plan) in sorted(self.probed.items())
                for p in plan.phases]
