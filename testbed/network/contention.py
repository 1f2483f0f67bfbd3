"""Tasks' transfers through the shared links, solved jointly (testbed/network/fluid.py).

A task's phases run as in testbed/clock.py: download, compute, upload, each transfer waiting its device's
latency before its bytes flow. Through shared links a flow's bytes move at its max-min fair rate (capped by the
device's own rate), so the transfers of every task that may overlap are solved together:
- downloads flow from dispatch + latency; each is cut where its device goes offline first (offline_at);
- a completed download starts the compute, whose seconds are the device's own; the upload flows from the
  compute's end + latency, through the uplinks, cut as the download is;
- downlinks and uplinks are separate links (a cell's two directions, the server's egress and ingress), so the
  downloads are solved first and the uploads from the instants those give.
A transfer cut at offline_at gets an infinite duration, which the task's plan (clock.plan_task) turns into a drop
at that very instant; its partial bytes, and those of a transfer a round's close cuts, follow the flow's solved
profile (SharedTimeline.spent), so bytes are conserved. A transfer the links never slowed keeps its private
seconds bit for bit, so links that never bind change no instant.

A synchronous round solves its tasks alone. An asynchronous server adds tasks while others are in flight: each
dispatch at t solves its new transfers from t; a task in flight (`carried`) keeps its earlier solve, timeline and
all, unless its transfers meet the new ones (or what the re-solved ones were) on a link at capacity, or its own
device goes offline before it ends; then it is solved again from t with the bytes it still has (the fluid model
is memoryless between events, and sets of flows that never meet at capacity are solved exactly apart:
network/meeting.py), and its timeline is replaced from t on. Either way the instants are those of one solve of
the whole, to rounding. Where every carried solve stands, the planner first tries the new tasks alone beside the
flows in flight (`beside_in_flight`, from their rows kept across dispatches: network/inflight.py), which gives
this solve's answer wherever they meet none of them at capacity, without reading the carried tasks again.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from testbed.clock import Phase, Timeline
from testbed.network import fluid, fluid_few, meeting
from testbed.network.inflight import InFlightLinks
from testbed.network.topology import Topology

Profile = fluid.Profile
NO_FLOW: Profile = ((), ())


@dataclass(frozen=True)
class SharedTimeline(Timeline):
    """A Timeline whose transfers went through shared links: what each moved by any instant is its flow's."""

    starts: tuple[float, float, float] = (0.0, 0.0, 0.0)   # download, compute, upload phase starts
    down_profile: Profile = NO_FLOW
    up_profile: Profile = NO_FLOW

    @property
    def end_s(self) -> float:
        """The instant its last phase ends, by the additions plan_task makes (each phase's seconds in turn)."""
        download, compute, upload = self.seconds
        return self.starts[0] + download + compute + upload

    def spent(self, phase: str, elapsed_s: float, full: bool) -> tuple[int, int]:
        if full or phase == "compute":
            return super().spent(phase, elapsed_s, full)
        total, profile, start = ((self.bytes_down, self.down_profile, self.starts[0]) if phase == "download"
                                 else (self.bytes_up, self.up_profile, self.starts[2]))
        return min(total, int(fluid.moved_by(profile, start + elapsed_s))), 0


class Carried(NamedTuple):
    """A task in flight when others are dispatched: its device, its timeline so far and when it goes offline (a
    named tuple: a hundred a dispatch)."""

    device: int
    timeline: SharedTimeline
    offline_at: float


class Usage:
    """Each link's summed rate between the solve's events: rows (direction, link, t_start, t_end, Bps), kept as
    column chunks (a dispatch through 100 cells gives hundreds, and links.csv's log filters them as arrays)."""

    def __init__(self, rows: list[tuple[str, int, float, float, float]] = ()):
        self.chunks: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        for direction, link, start, end, bps in rows:
            self.extend(direction, np.array([link]), np.array([start]), np.array([end]), np.array([bps]))

    def extend(self, direction: str, link: np.ndarray, start: np.ndarray, end: np.ndarray, bps: np.ndarray) -> None:
        """Rows of one direction, as columns, after those already here."""
        self.chunks.append((direction, link, start, end, bps))

    def add(self, direction: str, flows) -> None:
        """The links' loads of a solve of this direction's flows, between its events: event by event, each loaded
        link in index order."""
        event, link = np.nonzero(flows.load_Bps > 0)   # row-major: by event, then link
        ends = np.append(flows.event_s[1:], math.inf)
        self.extend(direction, link, flows.event_s[event], ends[event], flows.load_Bps[event, link])


def contend(topology: Topology, t: float, devices: np.ndarray, timelines: list[Timeline], offline_at: np.ndarray,
            server: bool = True, carried: tuple[Carried, ...] = (), keep: bool = True,
            in_flight: InFlightLinks | None = None, beside: "Beside | None" = None
            ) -> tuple[list[SharedTimeline], Usage]:
    """These devices' tasks dispatched at t (their private timelines, in the same order), through their cells'
    links and, with `server`, their backhauls' and the server's (without: to and from their cell's edge server,
    hierarchical aggregation's); with the `carried` tasks in flight at t: those whose earlier solve still stands
    keep it unless the new transfers meet theirs on a link at capacity (meeting.py), the others are solved again
    from t. Returns the timelines of the carried tasks (a kept one: its very timeline), then of the new ones, and
    the links' usage from t on the links the solve crossed. Without `keep`, every carried task is solved again
    (what the tests compare the kept solves with). `in_flight`: an asynchronous run's flows (inflight.py),
    whose rows give the kept tasks' segments, where it holds them; the usage is then left to them (empty).
    `beside`: what beside_in_flight found of these tasks where it gave no answer (their downloads, where those
    met no flow in flight; where and whom they met), which stands where every carried task keeps its solve and
    the offline instants are those it had."""
    kept = {i: c for i, c in enumerate(carried) if keep and _stands(c)}
    offline_at = np.asarray(offline_at).tolist()
    usage = Usage([])
    if beside is not None and (len(kept) < len(carried) or beside.offline_at != offline_at):
        beside = None   # it stands where every carried task keeps its solve and the offline instants are its own
    if beside is not None and beside.downloaded is not None:
        tasks = dict(enumerate(beside.downloaded, start=len(carried)))
    else:
        tasks = {i: _State.of_carried(c, t) for i, c in enumerate(carried) if i not in kept}
        tasks |= {len(carried) + i: _State.of_new(int(d), tl, t, until)
                  for i, (d, tl, until) in enumerate(zip(np.asarray(devices).tolist(), timelines, offline_at))}
        _transfers(topology, "down", t, tasks, kept, lambda c: _State.of_carried(c, t), server, usage, in_flight,
                   beside.met if beside is not None and beside.met.direction == "down" else None)
        for task in tasks.values():
            task.compute_done()
    _transfers(topology, "up", t, tasks, kept, lambda c: _State.of_carried(c, t, keep_download=True), server, usage,
               in_flight, beside.met if beside is not None and beside.met.direction == "up" else None)
    return [tasks[i].timeline() if i in tasks else carried[i].timeline
            for i in range(len(carried) + len(timelines))], usage


class Met(NamedTuple):
    """Where beside_in_flight's exact check (meeting.OnLinks) failed: the direction, whether the new flows solved
    each alone crowd a link together, and else the tasks in flight (serial numbers) whose rows they meet at
    capacity. It is the first pass of contend's loop for that direction (_transfers), which takes it as it is."""

    direction: str
    crowded: bool
    serials: list[int]


class Beside(NamedTuple):
    """What beside_in_flight found where it gave no answer, with the offline instants it had: the new tasks with
    their downloads solved (where only the uploads may meet a flow in flight; else None), and where they met."""

    offline_at: list[float]
    downloaded: list["_State"] | None
    met: Met


def beside_in_flight(topology: Topology, t: float, devices: list[int] | np.ndarray, timelines: list[Timeline],
                     offline_at: list[float] | np.ndarray, flows: InFlightLinks,
                     found: list[Beside] | None = None) -> list[SharedTimeline] | None:
    """contend's answer for these new tasks, to and from the server, where every task in flight keeps its solve
    (`flows`: theirs, inflight.py, whose hold says they all stand): the new transfers solved alone beside the
    flows in flight, or together where none moves in their direction, as contend solves them. None where some
    new flow may meet one in flight, or another new one, at capacity: contend decides, and `found` (a list)
    holds what it may take from here (Beside)."""
    until = offline_at if isinstance(offline_at, list) else np.asarray(offline_at).tolist()
    devices = devices if isinstance(devices, list) else np.asarray(devices).tolist()
    if len(devices) <= meeting.FEW:   # task by task, each clear of the flows in flight and of those before it
        pending: dict[str, dict[int, list[tuple[float, float, float]]]] = {"down": {}, "up": {}}
        quick = []
        for d, tl, u in zip(devices, timelines, until):
            if (one := _one_beside(topology, t, d, tl, u, flows, pending)) is None:
                break   # the steps below find where they may meet one (and keep their downloads where those stand)
            quick.append(one)
        else:
            return quick
    tasks = [_State.of_new(d, tl, t, u) for d, tl, u in zip(devices, timelines, until)]
    for direction in ("down", "up"):
        flowing = [task for task in tasks if task.flow[direction] is not None]
        met = _alone_beside(topology, direction, t, flowing, flows) if flowing else None
        if met is not None:
            if found is not None:
                found[:] = [Beside(until, tasks if direction == "up" else None, met)]
            return None
        if direction == "down":
            for task in tasks:
                task.compute_done()
    return [task.timeline() for task in tasks]


def _one_beside(topology: Topology, t: float, device: int, tl: Timeline, until: float, flows: InFlightLinks,
                pending: dict[str, dict[int, list[tuple[float, float, float]]]]) -> SharedTimeline | None:
    """beside_in_flight's steps for one new task (most dispatches send one), without a _State: its download and
    then its upload, each alone on its links and clear of the flows in flight and of the `pending` new ones
    (InFlightLinks.clear_one), which it joins; None where either may meet one. Where every new flow is clear of
    those before it, no link ever carries new and other flows at capacity: each flow's solve alone is theirs."""
    down = _one_flow(topology, flows, "down", device, t, t + tl.latency_s, tl.bytes_down, tl.down_Bps, until,
                     tl.latency_s + tl.bytes_down / tl.down_Bps, pending["down"])
    if down is None:
        return None
    t_compute = t + down[0]   # compute_done's additions
    t_upload = t_compute + tl.seconds[1]
    if math.isfinite(t_upload) and t_upload + tl.latency_s < until:
        up = _one_flow(topology, flows, "up", device, t_upload, t_upload + tl.latency_s, tl.bytes_up, tl.up_Bps, until,
                       tl.latency_s + tl.bytes_up / tl.up_Bps, pending["up"])
        if up is None:
            return None
    else:
        up = (math.inf, NO_FLOW)   # offline before its upload flows
    return SharedTimeline(tl.bytes_down, tl.flops, tl.bytes_up, tl.latency_s, tl.down_Bps, tl.up_Bps,
                          (down[0], tl.seconds[1], up[0]), (t, t_compute, t_upload), down[1], up[1])


def _one_flow(topology: Topology, flows: InFlightLinks, direction: str, device: int, phase_start: float,
              start: float, nbytes: int, cap: float, until: float, private_s: float,
              pending: dict[int, list[tuple[float, float, float]]]) -> tuple[float, Profile] | None:
    """One new flow solved alone (meeting.alone_within) where it is clear of the flows in flight and of the pending
    new ones (link -> (start, end, rate) of each), which it then joins: its phase's seconds and its profile; None
    where it may meet one."""
    links = topology.link_row(device, direction)
    end, moved, done, waited, rate = meeting.alone_within(start, float(nbytes), cap,
                                                          topology.link_limit(device, direction), until)
    if rate is not None and not flows.clear_one(direction, start, end, rate, links, pending):
        return None
    return _alone_result(phase_start, start, private_s, end, moved, done, waited, rate is not None)


def _alone_result(phase_start: float, start: float, private_s: float, end: float, moved: float, done: bool,
                  waited: float, moves: bool) -> tuple[float, Profile]:
    """A new flow's phase seconds and profile from its solve alone, as _State.solved makes them: its private
    seconds bit for bit where it never waited."""
    profile = ((start, end), (0.0, 0.0 + moved)) if moves else ((end,), (0.0 + moved,))
    return (math.inf if not done else private_s if waited == 0 else end - phase_start), profile


def _alone_beside(topology: Topology, direction: str, t: float, flowing: list[_State],
                  flows: InFlightLinks) -> Met | None:
    """_transfers of these new flows where no flow in flight is taken in: solved together where none moves bytes
    of this direction after t, else each alone (meeting.alone_within, in Python floats: a dispatch has a few), then
    checked against the flows in flight on their links, quickly (inflight.py's unclear), then as _transfers does
    (meeting.OnLinks) on the links the quick check left open; where they meet one or crowd a link, what that check
    found (else None)."""
    if len(flowing) > 1 and not flows.moving(direction, t):   # one flow: alone_within is its solve (meeting.alone)
        solved, _ = _solve(topology, direction, flowing, True, loads=False)
        for task, flow in zip(flowing, _Solved.each(solved)):
            task.solved(direction, flow)
        return None
    rows = topology.link_rows([task.device for task in flowing], direction)
    up = direction == "up"
    each = [meeting.alone_within(*task.flow[direction], task.tl.up_Bps if up else task.tl.down_Bps,
                                 topology.link_limit(task.device, direction), task.offline_at) for task in flowing]
    moving = [i for i, flow in enumerate(each) if flow[4] is not None]
    movers = [(flowing[i].flow[direction][0], each[i][0], each[i][4], rows[i]) for i in moving]
    if unclear := flows.unclear(direction, movers):   # movers: none where there are none
        start, end, rate, _ = zip(*movers)   # their segments, as meeting.of_solved reads meeting.alone's
        alone = meeting.Segments(np.array(start, dtype=float), np.array(end, dtype=float),
                                 np.array(rate, dtype=float), np.array(moving, dtype=np.int64))
        links = np.array(rows, dtype=np.int64)
        segments, padded, serials = flows.on(direction, t, links, unclear)   # elsewhere surely no meeting
        both = meeting.OnLinks((alone, links), (meeting.NONE, links[:0]), (segments, padded),
                               topology.capacity[direction])
        if both.apart_fails():
            return Met(direction, True, [])
        if (met := both.meeting()).any():
            return Met(direction, False, serials[met].tolist())
    k = 0 if direction == "down" else 1
    for task, (end, moved, done, waited, rate) in zip(flowing, each):
        start = task.flow[direction][0]
        task.flow[direction] = None
        task.seconds[2 * k], task.profile[direction] = _alone_result(task.t_upload if k else task.t0, start,
                                                                     task.private[k], end, moved, done, waited,
                                                                     rate is not None)
    return None


def _stands(c: Carried) -> bool:
    """A carried task's earlier solve stands, as far as its own device goes: it arrived there, before its
    device goes offline, so only other transfers could change it."""
    return c.timeline.end_s <= c.offline_at


class _State:
    """One task as the solve from t sees it: what each transfer still has to move, and from when."""

    def __init__(self, device: int, tl: Timeline, t0: float, offline_at: float):
        self.device, self.tl, self.t0, self.offline_at = device, tl, t0, offline_at
        self.carried = False   # in flight before t: its earlier solve is tl's
        # the transfers' seconds on the device's own links: the very expressions of its private timeline
        self.private = (tl.latency_s + tl.bytes_down / tl.down_Bps, tl.latency_s + tl.bytes_up / tl.up_Bps)
        self.seconds = [math.nan, tl.seconds[1], math.nan]
        self.t_compute = self.t_upload = math.nan
        self.flow: dict[str, tuple[float, float] | None] = {"down": None, "up": None}   # (flow start, bytes left)
        self.profile: dict[str, Profile] = {"down": NO_FLOW, "up": NO_FLOW}             # before t

    @classmethod
    def of_new(cls, device: int, tl: Timeline, t: float, offline_at: float) -> "_State":
        task = cls(device, tl, t, offline_at)
        task.flow["down"] = (t + tl.latency_s, float(tl.bytes_down))
        return task

    @classmethod
    def of_carried(cls, c: Carried, t: float, keep_download: bool = False) -> "_State":
        """A task in flight solved again from t; with `keep_download`, only its upload (its download's solve
        stands)."""
        tl = c.timeline
        task = cls(c.device, tl, tl.starts[0], c.offline_at)
        task.carried = True
        if not (tl.starts[1] <= t or keep_download):   # still downloading or waiting its latency: the rest from t
            task._carry("down", tl.down_profile, tl.starts[0] + tl.latency_s, tl.bytes_down, t)
            return task
        task.seconds[0], task.t_compute, task.t_upload = tl.seconds[0], tl.starts[1], tl.starts[2]
        task.profile["down"] = tl.down_profile
        if tl.starts[2] + tl.latency_s < c.offline_at:   # its upload flows, or will: solved again from t
            task._carry("up", tl.up_profile, tl.starts[2] + tl.latency_s, tl.bytes_up, t)
        else:
            task.seconds[2] = tl.seconds[2]
        return task

    def _carry(self, direction: str, profile: Profile, flow_start: float, nbytes: int, t: float) -> None:
        if flow_start >= t:   # not flowing yet: as planned
            self.flow[direction] = (flow_start, float(nbytes))
            return
        moved = fluid.moved_by(profile, t)
        times, amounts = profile
        kept = bisect_left(times, t)   # the breakpoints before t (times are non-decreasing)
        self.profile[direction] = (times[:kept] + (t,), amounts[:kept] + (moved,))
        self.flow[direction] = (t, float(nbytes) - moved)

    def compute_done(self) -> None:
        """After the downloads are solved: when a task whose download was solved now computes and uploads."""
        if not math.isnan(self.t_compute):
            return
        self.t_compute = self.t0 + self.seconds[0]   # the additions plan_task makes: the same instants
        self.t_upload = self.t_compute + self.seconds[1]
        flows_at = self.t_upload + self.tl.latency_s
        if math.isfinite(self.t_upload) and flows_at < self.offline_at:
            self.flow["up"] = (flows_at, float(self.tl.bytes_up))
        else:
            self.seconds[2] = math.inf   # offline before its upload flows: plan_task drops it there

    def solved(self, direction: str, flow: "_Solved") -> None:
        """This task's transfer of `direction` as solved: its seconds and its profile from t; nothing left to solve."""
        self.flow[direction] = None
        before_t, before_b = self.profile[direction]
        offset = before_b[-1] if before_b else 0.0
        times = before_t[:-1] + flow.times + (flow.end_s,)
        amounts = before_b[:-1] + tuple(m + offset for m in flow.moved_at) + (offset + flow.moved,)
        self.profile[direction] = (times, amounts)
        phase_start = self.t0 if direction == "down" else self.t_upload
        if not flow.done:
            seconds = math.inf
        elif not before_t and flow.waited_s == 0:
            seconds = self.private[0 if direction == "down" else 1]   # never slowed: bit for bit the private link's
        else:
            seconds = flow.end_s - phase_start
        self.seconds[0 if direction == "down" else 2] = seconds

    def timeline(self) -> SharedTimeline:
        tl = self.tl
        return SharedTimeline(tl.bytes_down, tl.flops, tl.bytes_up, tl.latency_s, tl.down_Bps, tl.up_Bps,
                              tuple(self.seconds), (self.t0, self.t_compute, self.t_upload),
                              self.profile["down"], self.profile["up"])


def _transfers(topology: Topology, direction: str, t: float, tasks: dict[int, "_State"], kept: dict[int, Carried],
               take, server: bool, usage: Usage, in_flight: InFlightLinks | None = None,
               met: Met | None = None) -> None:
    """Solve the tasks' flows of one direction together; each task takes its flow's result. Where kept carried
    tasks move bytes of this direction after t, the new flows are first solved each alone (meeting.alone), then
    together; the kept tasks whose flows meet theirs at capacity (meeting.py) are taken in, made a task by `take`
    and moved from `kept` to `tasks`, until none meets them; the others keep their solve. The kept tasks' segments
    come from `in_flight`'s rows where it holds them (no usage then: the rows are links.csv's), else their profiles.
    `met`: the first pass, as beside_in_flight made it from those rows."""
    rows = in_flight.kept(direction, t, kept) if in_flight is not None else None
    standing = rows if rows is not None else _Standing(topology, direction, t, kept, server)
    apart = standing.moving()   # first each alone: most new flows share no binding link with another
    if met is not None and rows is not None:   # they crowd a link: solved together; else the kept they met are in
        apart = False
        for i in ([] if met.crowded else rows.take_serials(met.serials)):
            tasks[i] = take(kept.pop(i))
    while True:
        order = sorted(i for i, task in tasks.items() if task.flow[direction] is not None)
        if not order:
            return
        apart = apart and standing.moving()   # with none left kept, the one solve of all
        flows, links = _solve(topology, direction, [tasks[i] for i in order], server, apart, loads=rows is None)
        if not standing.moving():
            break
        was = [tasks[i] for i in order if tasks[i].carried]
        was_set = ((standing.of([task.tl for task in was]), _links(topology, [task.device for task in was], direction,
                                                                    server)) if was else (meeting.NONE, links[:0]))
        if rows is not None and not apart and rows.clear((flows.segments() if isinstance(flows, fluid_few.Few) else
                                                          meeting.of_solved(flows), links), was_set):
            break   # surely no meeting: what meeting.OnLinks would find
        both = meeting.OnLinks((meeting.of_solved(flows), links), was_set, standing.near(links, was_set[1]),
                               topology.capacity[direction])
        if apart and both.apart_fails():
            apart = False
            continue
        met = both.meeting()
        if not met.any():
            break
        for i in standing.take(met):
            tasks[i] = take(kept.pop(i))
        apart = False   # a kept flow taken in met a new one at capacity: alone, they would crowd that link
    for i, flow in zip(order, _Solved.each(flows)):
        tasks[i].solved(direction, flow)
    if rows is not None:
        return
    if standing.moving():
        usage.extend(direction, *both.usage_rows())
    else:
        usage.add(direction, flows)


class _Standing:
    """The kept carried tasks that move bytes of one direction after t, as their earlier solve has them: their
    rate segments from t on and their links (meeting.py's kept set)."""

    def __init__(self, topology: Topology, direction: str, t: float, kept: dict[int, Carried], server: bool):
        self.t, self.up = t, direction == "up"
        # attribute getters, not a method call a task: ~100 kept tasks, twice a dispatch
        self.profile = attrgetter("up_profile" if self.up else "down_profile")
        of_carried = attrgetter("timeline." + ("up_profile" if self.up else "down_profile"))
        self.carried = {i: c for i, c in kept.items() if (p := of_carried(c)) and p[0][-1] > t}
        self.segments = self.of([c.timeline for c in self.carried.values()])
        self.links = _links(topology, [c.device for c in self.carried.values()], direction, server)

    def of(self, timelines: list[SharedTimeline]) -> meeting.Segments:
        """These timelines' flows of this direction as their earlier solve had them, from t on."""
        return meeting.of_profiles(list(map(self.profile, timelines)), self.t)

    def moving(self) -> bool:
        """Some kept task moves bytes of this direction after t."""
        return bool(self.carried)

    def near(self, *links: np.ndarray) -> tuple[meeting.Segments, np.ndarray]:
        """The kept set meeting.OnLinks compares with flows on these links: all of it."""
        return self.segments, self.links

    def take(self, mask: np.ndarray) -> list[int]:
        """Those of `mask` leave the kept set; returns their indices."""
        taken = np.fromiter(self.carried, np.int64, len(self.carried))[mask].tolist()
        gone = set(taken)
        self.carried = {i: c for i, c in self.carried.items() if i not in gone}
        self.segments = self.of([c.timeline for c in self.carried.values()])
        self.links = self.links[~mask]
        return taken


def _links(topology: Topology, devices: list[int], direction: str, server: bool) -> np.ndarray:
    return topology.links(np.array(devices, dtype=np.int64), direction, server)


def _solve(topology: Topology, direction: str, flowing: list["_State"], server: bool, apart: bool = False,
           loads: bool = True):
    """fluid.solve of these tasks' flows of `direction` (`apart`: each flow alone, meeting.alone): the Flows, and
    each flow's links. Without `loads`, the links' loads are left out (links.csv comes from the rows then)."""
    links = _links(topology, [task.device for task in flowing], direction, server)
    start = np.array([task.flow[direction][0] for task in flowing])
    left = np.array([task.flow[direction][1] for task in flowing])
    cap = np.array([task.tl.down_Bps if direction == "down" else task.tl.up_Bps for task in flowing])
    stop = np.array([task.offline_at for task in flowing])
    if apart:
        return meeting.alone(start, left, cap, links, topology.capacity[direction], stop), links
    if not loads and len(flowing) <= fluid_few.FEW_FLOWS:   # fluid.solve's loop for a few, without its arrays
        return fluid_few.solve(start.tolist(), left.tolist(), cap.tolist(), links.tolist(),
                               topology.capacities[direction], stop.tolist()), links
    return fluid.solve(start, left, cap, links, topology.capacity[direction], stop_s=stop, loads=loads,
                       checked=False), links


class _Solved(NamedTuple):
    """One flow of a solve, as Python numbers: its breakpoints (instants, bytes moved by each) and its end (a
    named tuple: a dispatch makes one a transfer)."""

    times: tuple[float, ...]
    moved_at: tuple[float, ...]
    end_s: float
    moved: float
    done: bool
    waited_s: float

    @staticmethod
    def each(flows) -> list["_Solved"]:
        if isinstance(flows, fluid_few.Few):
            return list(map(_Solved, flows.times, flows.moved_at, flows.end_s, flows.moved, flows.done, flows.waited_s))
        breaks, times, moved = flows.breaks.tolist(), flows.break_s.tolist(), flows.break_moved.tolist()
        return [_Solved(tuple(times[lo:hi]), tuple(moved[lo:hi]), end, total, done, waited)
                for lo, hi, end, total, done, waited in zip(breaks[:-1], breaks[1:], flows.end_s.tolist(),
                                                            flows.moved.tolist(), flows.done.tolist(),
                                                            flows.waited_s.tolist())]


def phase_wait(phase: Phase, timeline: Timeline | None, moved: int | None = None) -> float:
    """Seconds the shared links added to a transfer phase: its length less what its device's own link would
    have taken to move the same bytes (latency included); 0 for a compute phase or a private timeline.
    `moved`: the bytes it moved, where the caller has them (timeline.spent's)."""
    if phase.phase not in ("download", "upload") or not isinstance(timeline, SharedTimeline):
        return 0.0
    down = phase.phase == "download"
    if phase.completed:   # all its bytes (timeline.spent's answer, without the call: an event row a phase)
        elapsed, moved = phase.delay_s, (timeline.bytes_down if down else timeline.bytes_up) if moved is None else moved
    else:
        elapsed = phase.end_s - phase.start_s
        moved = timeline.spent(phase.phase, elapsed, False)[0] if moved is None else moved
    alone = timeline.latency_s + moved / (timeline.down_Bps if down else timeline.up_Bps)
    return max(0.0, elapsed - alone) if moved else 0.0


class Waits:
    """A round's (an aggregation's) contention columns, phase by phase: the seconds its transfers waited on shared
    links in all, the most one task waited, and the bytes of the transfers that waited."""

    def __init__(self):
        self.total_s, self.per_task, self.bytes = 0.0, {}, 0

    def add(self, phase: Phase, timeline: Timeline, nbytes: int) -> None:
        """A phase and the bytes it moved (timeline.spent's, over its span)."""
        waited = phase_wait(phase, timeline, nbytes)
        if waited > 0:
            self.total_s += waited
            self.per_task[id(timeline)] = self.per_task.get(id(timeline), 0.0) + waited
            self.bytes += nbytes

    def columns(self) -> dict:
        return {"network_wait_s": self.total_s, "network_wait_max_s": max(self.per_task.values(), default=0.0),
                "contended_bytes": self.bytes}
