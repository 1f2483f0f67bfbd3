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
A part of the kit (kit.py), its `prober`, makes each round's Probe.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

import devices
from testbed.algorithms.base import ServerState
from testbed.clock import Phase, TaskPlan, Timeline, plan_task
from testbed.errors import TestbedError
from testbed.payload import CODECS
from testbed.protocols.evaluation import Evaluation
from testbed.protocols.planning import Planner
from testbed.resources import Resources

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


class Prober:
    """Each synchronous round's Probe, on the run's clock and model. `dataset`: the training samples' tensors,
    `partition`: each device's (indices into them), `num_samples`: how many each holds; `forward_flops`: a
    sample's forward pass; `down`: the name of the downlink codec the model is probed with; `shared`: the devices
    share links (testbed/network/), so the probes' transfers are solved together."""

    def __init__(self, planner: Planner, fleet: devices.Fleet, resources: Resources, evaluation: Evaluation,
                 dataset, partition: list[np.ndarray], num_samples: np.ndarray, forward_flops: int, down: str,
                 shared: bool):
        self._planner, self._fleet, self._resources, self._evaluation = planner, fleet, resources, evaluation
        self._dataset, self._partition, self._num_samples = dataset, partition, num_samples
        self._forward_flops, self._down, self._shared = forward_flops, down, shared

    def probe(self, state: ServerState, r: int, t0: float) -> Probe:
        """Round r's probe from t0: the candidates' losses on the model in `state`, each download, forward pass
        over its training samples and upload planned on the clock."""
        return Probe(t0, lambda ids: self._plan(ids, r, t0), lambda d: self._loss(state, d))

    def _plan(self, ids: np.ndarray, r: int, t0: float) -> dict[int, tuple[Timeline, TaskPlan]]:
        bytes_down = self._planner.payload_bytes(CODECS[self._down])
        capacity = self._fleet.train_flops_per_s(r)
        timelines = {d: self._planner.timeline(d, bytes_down, self._forward_flops * int(self._num_samples[d]),
                                               PROBE_BYTES, float(capacity[d]), t0) for d in ids.tolist()}
        if self._shared:   # the probes' transfers share the links too, solved together
            shared, online_until, _ = self._planner.contended(ids.tolist(), list(timelines.values()), t0)
            timelines = dict(zip(timelines, shared))
        else:
            ends = np.array([t0 + sum(tl.seconds) for tl in timelines.values()])
            online_until = self._fleet.availability.online_until_each(ids, t0, ends)
        planned = {}
        for (d, tl), until in zip(timelines.items(), np.asarray(online_until).tolist()):
            offline_at, _ = self._resources.offline_at(d, t0, tl.seconds, until)
            planned[d] = (tl, plan_task(d, t0, tl.seconds, offline_at))
        return planned

    def _loss(self, state: ServerState, d: int) -> float:
        rows = torch.from_numpy(self._partition[d])
        data = self._dataset
        return self._evaluation.evaluate(state.params, data.train_x[rows], data.train_y[rows])[1]
