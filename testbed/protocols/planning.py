"""How a task plays out on the clock: its timeline (bytes over the links, FLOPs over the device's FLOP/s at its
capability tier, or with compute: latency the predicted time of its steps, testbed/latency/clock.py) and its plan
until its device goes offline or its battery empties (clock.plan_task), for the tasks dispatched at one instant
together; through shared links (testbed/network/) their transfers are solved together, with the tasks still in
flight where an asynchronous dispatch carries them. A part of the kit (kit.py): its `planner`.
"""
from __future__ import annotations

import math
from operator import and_
from typing import NamedTuple

import numpy as np

import devices
from testbed.algorithms.base import Task
from testbed.clock import TaskPlan, Timeline, plan_task
from testbed.flops import compute_seconds, training_flops
from testbed.network.contention import Carried, beside_in_flight, contend
from testbed.network.linklog import LinkLog
from testbed.network.topology import Topology
from testbed.resources import Resources
from testbed.resources.timing import varying_timeline


class Planned(NamedTuple):
    """A task as planned at dispatch: what it costs, and how it plays out on the clock. A named tuple: a round
    at 100,000 devices plans a thousand, and a frozen dataclass costs three times as much to make."""

    task: Task
    timeline: Timeline
    plan: TaskPlan
    battery_cut: bool   # its device is lost when its battery empties, before its on-interval ends



class Planner:
    """plan_round and what it is made of; `timeline` (a device's phases for given bytes and FLOPs, e.g. a probe's)
    and `payload_bytes` (a codec's size of the model). `topology`: None where every device has links of its own;
    `links`: links.csv's rows, as the solves give them; `shapes`: the model's parameter shapes; `forward_flops`: a
    sample's forward pass; `latency`: compute: latency's FleetLatency (testbed/latency/clock.py), None on FLOPs."""

    def __init__(self, fleet: devices.Fleet, topology: Topology | None, links: LinkLog, resources: Resources,
                 shapes: dict, forward_flops: int, latency=None):
        self.fleet, self.topology, self.links, self._resources = fleet, topology, links, resources
        self._shapes, self._forward_flops, self._latency = shapes, forward_flops, latency
        self._capacity_of: tuple = (None, None)   # (key, (n,) FLOP/s) of the last _capacity call
        self._payload_sizes: dict = {}            # codec -> bytes, where it depends on the shapes alone

    def plan_round(self, tasks: dict[int, Task], r: int, t0: float, carried: dict[int, Planned] | None = None,
                   server: bool = True) -> dict[int, Planned]:
        """Round r's tasks (by device), all dispatched at t0 at the capability tier of round r (an asynchronous
        dispatch: of the aggregation its tasks feed). Through shared links, the tasks `carried` in flight at t0
        (an asynchronous dispatch's, {} at its first) are planned with them, and those planned again (whose
        earlier solve did not stand) are in the answer too; `server`: their transfers go to and from the server
        (else to their cell's edge server, hierarchical aggregation's)."""
        capacity = self._capacity(r)
        timelines = {d: self._timeline(t, float(capacity[d]), t0) for d, t in tasks.items()}
        if self.topology is not None:
            return self._plan_shared(tasks, timelines, t0, carried, server)
        ids = np.fromiter(tasks, np.int64, len(tasks))
        ends = np.array([t0 + tl.seconds[0] + tl.seconds[1] + tl.seconds[2] for tl in timelines.values()])
        online_until = self.fleet.availability.online_until_each(ids, t0, ends)
        return {d: self._planned(tasks[d], timelines[d], t0, until) for d, until in zip(tasks, online_until.tolist())}

    def _plan_shared(self, tasks: dict[int, Task], timelines: dict[int, Timeline], t0: float,
                     carried: dict[int, Planned] | None, server: bool) -> dict[int, Planned]:
        """plan_round through shared links (network/contention.py): the new tasks, and the carried ones planned
        again (those whose solve did not stand). A carried task's device is online from its dispatch to t0, so
        its on-interval's end is its offline instant."""
        shared, until, again = self.contended(list(tasks), list(timelines.values()), t0, carried, server)
        return {d: Planned(carried[d].task, tl, plan_task(d, tl.starts[0], tl.seconds, u), False)
                for d, (tl, u) in again.items()} | {d: self._planned(tasks[d], tl, t0, u)
                                                    for d, tl, u in zip(tasks, shared, until)}

    def contended(self, ids: list[int], timelines: list[Timeline], t0: float, carried: dict | None = None,
                  server: bool = True) -> tuple[list, list[float], dict]:
        """These devices' tasks dispatched at t0 (their private timelines), with the
        `carried` ones in flight (device -> a Planned, or what reads as one; an asynchronous dispatch's, {} at its
        first), through the shared links: their timelines and each device's offline instant, and the carried
        tasks solved again (device -> (timeline, offline instant)); links.csv told. Each offline instant is asked
        for up to the instant the task needs it (as the private plan does, not re-sampling the fleet past the
        horizon for devices online beyond it), again where the shared links made a task last longer than that.
        An asynchronous dispatch's flows wait on the links from one call to the next (network/inflight.py): where
        every carried solve stands and the new transfers meet none of them at capacity, only the new tasks are
        solved, in Python lists (a dispatch most often sends one task)."""
        flows = self.links.flows if carried is not None and server else None
        need = [t0 + sum(tl.seconds) for tl in timelines]
        found = []   # what beside_in_flight found where it gave no answer (contention.Beside), for contend
        if flows is not None and flows.hold(carried):
            quick = self._settled(ids, t0, need, lambda until: beside_in_flight(self.topology, t0, ids, timelines,
                                                                                until, flows, found))
            if quick is not None:
                flows.add(ids, *quick, t0)
                return (*quick, {})
        carried = carried or {}
        n = len(carried)
        solved = {}

        def solve(until: list[float]) -> list:
            kept = tuple(map(Carried, carried, [p.timeline for p in carried.values()], until[:n]))
            shared, solved["usage"] = contend(self.topology, t0, np.array(ids, dtype=np.int64), timelines, until[n:],
                                              server, kept, in_flight=flows,
                                              beside=found.pop() if found else None)
            return shared

        shared, until = self._settled(list(carried) + ids, t0, [p.plan.end_s for p in carried.values()] + need, solve)
        if flows is not None:
            flows.record(carried, shared, until, ids)
        else:
            self.links.solved(solved["usage"], t0)
        again = {d: (tl, u) for (d, p), tl, u in zip(carried.items(), shared, until[:n]) if tl is not p.timeline}
        return shared[n:], until[n:], again

    def _settled(self, ids: list[int], t0: float, need: list[float], solve) -> tuple[list, list[float]] | None:
        """The timelines `solve` gives these devices' tasks from their offline instants, asked for up to `need`,
        and again wherever a task now lasts longer, until the instants settle; None where `solve` gives none."""
        until = self.fleet.availability.online_until_list(ids, t0, need)
        while True:
            shared = solve(until)
            if shared is None:
                return None
            # a cut task needed its device up to the cut
            ends = [end if math.isfinite(end := tl.starts[0] + sum(tl.seconds)) else u for tl, u in zip(shared, until)]
            grew = [not (end <= needed) for end, needed in zip(ends, need)]
            if not any(grew):
                return shared, until
            need = [max(needed, end) for needed, end in zip(need, ends)]   # np.maximum's picks (no NaN here)
            if not any(map(and_, grew, self.fleet.availability.may_change_list(until, need))):
                return shared, until   # each answer that grew is final: asking again gives it back
            answer = self._online_until_again(np.array(ids, dtype=np.int64), t0, np.array(need), np.array(until),
                                              np.array(grew))
            if np.array_equal(answer, until):
                return shared, until
            until = answer.tolist()

    def _online_until_again(self, ids: np.ndarray, t0: float, need: np.ndarray, until: np.ndarray,
                            grew: np.ndarray) -> np.ndarray:
        """online_until_each(ids, t0, need), where only the devices of `grew` need more than `until` was asked
        for: only those whose answer may change are asked again (a horizon that bounded it; a dispatch's few new
        tasks, not the ~100 in flight), unless asking re-sampled the fleet, which may move the others' answers
        (a horizon that bounded them); then all are."""
        availability = self.fleet.availability
        horizon = availability.horizon_s
        ask = grew & availability.may_change(until, need)
        if not ask.any():
            return until
        answer = until.copy()
        answer[ask] = availability.online_until_each(ids[ask], t0, need[ask])
        if availability.horizon_s != horizon:
            return availability.online_until_each(ids, t0, need)
        return answer

    def _capacity(self, r: int) -> np.ndarray:
        """Every device's FLOP/s at the capability tier of round (aggregation) r; kept for the next call, since
        an asynchronous run plans many dispatches for one aggregation, and for every round where no group
        redraws its tiers (an O(n) array, which an asynchronous run with K = 100 would build every 100 updates)."""
        key = r if self.fleet.tiers_change_each_round else 0
        if self._capacity_of[0] != key:
            self._capacity_of = (key, self.fleet.train_flops_per_s(r))
        return self._capacity_of[1]

    def _planned(self, task: Task, timeline: Timeline, t0: float, online_until: float) -> Planned:
        offline_at, battery_cut = self._resources.offline_at(task.device, t0, timeline.seconds, online_until)
        return Planned(task, timeline, plan_task(task.device, t0, timeline.seconds, offline_at), battery_cut)

    def _timeline(self, task: Task, capacity_flops_per_s: float, t0: float) -> Timeline:
        """The task's bytes, FLOPs and phase durations, dispatched at t0 (which matters where rates fluctuate)."""
        flops = training_flops(task.forward_flops or self._forward_flops, task.samples_processed)
        if self._latency is not None:   # the predicted time of its steps, as the FLOP/s that takes that long
            capacity_flops_per_s = self._latency.capacity(task, flops, capacity_flops_per_s)
        return self.timeline(task.device, self.payload_bytes(task.down), flops, self.payload_bytes(task.up),
                             capacity_flops_per_s, t0)

    def timeline(self, d: int, bytes_down: int, flops: int, bytes_up: int, capacity_flops_per_s: float,
                 t0: float) -> Timeline:
        """Device d's phase durations for these bytes and FLOPs, from t0: a task's, or a probe's."""
        fleet = self.fleet
        latency, down_Bps, up_Bps = float(fleet.latency_s[d]), float(fleet.down_Bps[d]), float(fleet.up_Bps[d])
        if self._resources.varying:
            compute_seconds(flops, capacity_flops_per_s)  # its checks
            return varying_timeline(d, t0, bytes_down, flops, bytes_up, latency, down_Bps, up_Bps,
                                    capacity_flops_per_s, fleet.speed, fleet.bandwidth)
        seconds = (latency + bytes_down / down_Bps, compute_seconds(flops, capacity_flops_per_s),
                   latency + bytes_up / up_Bps)
        return Timeline(bytes_down, flops, bytes_up, latency, down_Bps, up_Bps, seconds)

    def payload_bytes(self, codec) -> int:
        """A codec's payload size for this model; computed once where it depends on the shapes alone."""
        if not codec.depends_only_on_shapes:
            return codec.nbytes(self._shapes)
        size = self._payload_sizes.get(codec)   # one lookup: a codec's hash is its fields', 3,000 times a round
        if size is None:
            size = self._payload_sizes[codec] = codec.nbytes(self._shapes)
        return size
