"""An asynchronous run's flows on the shared links, kept from one dispatch to the next, and links.csv from them.

An asynchronous dispatch (contention.py) solves its new transfers beside the tasks in flight; where the new ones
meet none of those at capacity, every earlier solve stands. Asking that of every task's profile at every dispatch
costs as much as the solve, so the solved flows wait here as rows: one per rate segment of a flow and link it
crosses (start, end, rate, link), each direction apart, with the task it belongs to. They wait as Python tuples,
by link, each link's by end (in the order they came where their ends tie): a dispatch adds a few and asks a few
questions of the rows on its flows' links that end after its flows start (of the server link's hundred, a few),
which Python answers in less time than numpy takes to start; the full solves read them as arrays (`Rows`).

- A dispatch adds its new tasks' rows; one that solved carried tasks again replaces theirs (`record`).
- A task that left (it arrived, dropped, or was cut) keeps its rows for links.csv, and no dispatch asks them
  again; `hold` sees who left, from the tasks in flight it is handed.
- links.csv's rows (`take`): at each aggregation, every link's summed rate from the rows, where it changes, from
  the previous aggregation's instant (`since`) to this one, link by link in Python (a link most often carries
  one flow, whose rate is its row). Each step's rate is the exact sum of its rows' rates, rounded once: it
  depends on the rows alone, not on their order, so a run resumed from a checkpoint writes the bits of the
  unbroken run. The summed rates are the solves' (an earlier solve of a kept task is its final one).
- A checkpoint keeps the rows and what it holds of each task in flight (`saved`); a resumed run hands back the
  tasks' timelines (`resume`), and goes on as the unbroken run.
"""
from __future__ import annotations

import math
from bisect import bisect_right, insort
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Iterator, NamedTuple

import numpy as np

from testbed.network import meeting
from testbed.network.topology import DIRECTIONS, Topology

_PROFILE = {"down": "down_profile", "up": "up_profile"}
_END = itemgetter(1)   # a row's end
_START_CODE_LINK = itemgetter(0, 1, 2)   # links.csv's order of take's rows (start, direction code, link, end, Bps)
_FIRST = itemgetter(0)   # a change's instant (_link_steps)
# slack under a link's capacity within which the quick check leaves the decision to the exact one (meeting.py):
# far above the rounding of summed rates, so a quick "they meet nowhere" is the exact check's answer too
SLACK = 1e-6


class Rows(NamedTuple):
    """Rate segments on links: row i moves `rate` bytes/s over [start, end) across `link`, for task `task`."""

    start: np.ndarray
    end: np.ndarray
    rate: np.ndarray
    link: np.ndarray
    task: np.ndarray   # a serial number, one per task recorded (a device holds many tasks in a run)

    @classmethod
    def empty(cls) -> "Rows":
        return cls(np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

    @classmethod
    def of(cls, rows: list[tuple[float, float, float, int, int]]) -> "Rows":
        """Rows from tuples (start, end, rate, link, task)."""
        if not rows:
            return cls.empty()
        # float64, where links and serial numbers are exact; one pass over the values, half np.array's time
        table = np.fromiter(chain.from_iterable(rows), float, 5 * len(rows)).reshape(len(rows), 5)
        return cls(table[:, 0], table[:, 1], table[:, 2], table[:, 3].astype(np.int64), table[:, 4].astype(np.int64))

    def where(self, mask: np.ndarray) -> "Rows":
        return Rows(self.start[mask], self.end[mask], self.rate[mask], self.link[mask], self.task[mask])

    def tuples(self) -> list[tuple[float, float, float, int, int]]:
        return list(zip(*(column.tolist() for column in self)))


class Held(NamedTuple):
    """A task in flight as its rows were made: its timeline, the instant it ends, its device's offline instant
    then (a lower bound of what the availability answers later: its horizon only grows), its serial number."""

    timeline: object
    end: float
    offline_at: float
    serial: int


class InFlightLinks:
    """The rows of an asynchronous run's flows through `topology`, from `since` on; which tasks are in flight."""

    def __init__(self, topology: Topology):
        self.topology = topology
        # per direction and link, rows (start, end, rate, link, task), by end, in the order they came at a tie
        self.rows: dict[str, dict[int, list[tuple[float, float, float, int, int]]]] = {
            direction: {} for direction in DIRECTIONS}
        self.held: dict[int, Held] = {}   # device -> its task in flight
        self.alive: set[int] = set()      # the serial numbers of the tasks in flight
        self.serials = 0
        self.unsteady: set[int] = set()   # devices whose task ends after their offline instant (it will drop)
        self.since = -math.inf            # links.csv has the rows before this instant

    # ---- the tasks in flight -----------------------------------------------------------------------------
    def hold(self, carried: dict) -> bool:
        """The tasks in flight now (device -> what has a .timeline): those that left are let go; True where
        the rows are those of exactly these tasks, and each one's solve stands (it ends before its device goes
        offline), so that new flows meeting none of them leave every solve as it is."""
        # every task in flight was held (add, record): most often one left, the one whose arrival dispatches
        left = (self.held.keys() - carried.keys() if len(self.held) != len(carried) + 1 else
                [next(d for d in self.held if d not in carried)])
        for d in left:
            self.alive.discard(self.held.pop(d).serial)
            self.unsteady.discard(d)
        # carried timelines change only through record (planning.contended): the same devices are the same tasks
        return not self.unsteady and len(self.held) == len(carried)

    def add(self, devices: list[int], timelines: list, offline_at: list[float], t: float) -> None:
        """New tasks in flight (their timelines: contention.SharedTimeline; their devices' offline instants),
        their rows from t on."""
        if len(devices) <= meeting.FEW:   # a dispatch's few (most often one): task by task, in Python
            for d, tl, until in zip(devices, timelines, offline_at):
                self._add_one(d, tl, until, t)
            return
        first = self.serials
        self.serials += len(devices)
        self.alive.update(range(first, self.serials))
        for direction in DIRECTIONS:
            on = self.rows[direction]
            for row in _rows([getattr(tl, _PROFILE[direction]) for tl in timelines],
                             self.topology.links(np.array(devices, dtype=np.int64), direction), t,
                             np.arange(first, self.serials)):
                _insert(on, row)
        for serial, (d, tl, until) in enumerate(zip(devices, timelines, offline_at), start=first):
            self._hold_new(d, tl, until, serial)

    def _add_one(self, device: int, timeline, offline_at: float, t: float) -> None:
        """add for one task: each segment of its flows (meeting.few_segments' arithmetic) on each of its links."""
        serial = self.serials
        self.serials += 1
        self.alive.add(serial)
        for direction, (times, moved) in zip(DIRECTIONS, (timeline.down_profile, timeline.up_profile)):
            on, links = self.rows[direction], self.topology.link_row(device, direction)
            for s, e, m0, m1 in zip(times, times[1:], moved, moved[1:]):
                if e > (start := max(s, t)):
                    rate = (m1 - m0) / (e - s)
                    for link in links:
                        if link >= 0:
                            _insert(on, (start, e, rate, link, serial))
        self._hold_new(device, timeline, offline_at, serial)

    def _hold_new(self, device: int, timeline, offline_at: float, serial: int) -> None:
        """A new task in flight, held with its end and offline instant; unsteady where it ends after the latter."""
        end = timeline.end_s
        self.held[device] = Held(timeline, end, offline_at, serial)
        if end > offline_at:
            self.unsteady.add(device)

    def record(self, carried: dict, timelines: list, offline_at: list[float], new: list[int]) -> None:
        """After a full solve: the carried tasks (device -> its earlier .timeline), then the `new` devices'
        tasks, with their timelines and offline instants as solved. A carried task solved again has its rows
        made again from `since` (its profile before t is its earlier one); every offline instant is the newest."""
        devices = list(carried) + list(new)
        again = [i for i, (d, p) in enumerate(carried.items())
                 if self.held.get(d) is None or self.held[d].timeline is not timelines[i]]
        fresh = again + list(range(len(carried), len(devices)))
        leaving = [devices[i] for i in again if devices[i] in self.held]
        gone = {self.held.pop(d).serial for d in leaving}
        for direction, on in self.rows.items():   # their rows are on their devices' links
            for link in {link for row in self.topology.link_rows(leaving, direction) for link in row if link in on}:
                kept = [row for row in on[link] if row[4] not in gone]
                if kept:
                    on[link] = kept
                else:
                    del on[link]
        self.alive -= gone
        held, solved_again = self.held, set(again)
        for i, d in enumerate(devices[:len(carried)]):
            if i not in solved_again:   # its solve stood: only its offline instant is newer, if any
                if held[d].offline_at != offline_at[i]:
                    held[d] = held[d]._replace(offline_at=offline_at[i])
                if held[d].end > offline_at[i]:
                    self.unsteady.add(d)
                else:
                    self.unsteady.discard(d)
        self.unsteady.difference_update(devices[i] for i in fresh)   # add() tells again
        self.add([devices[i] for i in fresh], [timelines[i] for i in fresh], [offline_at[i] for i in fresh],
                 self.since)

    # ---- what a dispatch asks -----------------------------------------------------------------------------
    def all(self, direction: str) -> Iterator[tuple[float, float, float, int, int]]:
        """Every row of this direction, link by link."""
        return chain.from_iterable(self.rows[direction].values())

    def moving(self, direction: str, t: float) -> bool:
        """Some task in flight moves bytes of this direction after t."""
        alive = self.alive
        return any(end > t and task in alive for _, end, _, _, task in self.all(direction))

    def unclear(self, direction: str, movers: list[tuple[float, float, float, list[int]]]) -> set[int]:
        """The links where new flows, each alone at its rate over [start, end) on its links (start, end, rate, links
        padded with -1), may meet a flow in flight at capacity, or each other: each new flow in turn, on each of its
        links, is checked as clear_one checks it, with the rows in flight and the new ones before it, which it then
        joins. At any instant a link then carries at most what the last of its new flows there was checked with, so
        on a link not named none meets one (the exact check looks at these; none named: they surely meet none)."""
        pending: dict[int, list[tuple[float, float, float]]] = {}
        unclear = set()
        for start, end, rate, links in movers:
            unclear.update(link for link in links if link >= 0 and self._crowds(direction, link, start, end, rate,
                                                                                 pending))
            _join(pending, start, end, rate, links)
        return unclear

    def clear_one(self, direction: str, start: float, end: float, rate: float, links: list[int],
                  pending: dict[int, list[tuple[float, float, float]]] | None = None) -> bool:
        """One new flow (as `unclear` has them) surely meets no flow in flight at capacity, nor the `pending` new
        flows (link -> (start, end, rate) of each) before it; where it is clear, it joins them."""
        for link in links:
            if link >= 0 and self._crowds(direction, link, start, end, rate, pending):
                return False
        if pending is not None:
            _join(pending, start, end, rate, links)
        return True

    def _crowds(self, direction: str, link: int, start: float, end: float, rate: float,
                pending: dict[int, list[tuple[float, float, float]]] | None) -> bool:
        """A new flow on this link is neither alone over [start, end) nor SLACK under its capacity with the rows
        in flight there and the pending new flows within its span."""
        load = 0.0
        alive = self.alive
        for row_start, _, row_rate, _, task in _ending_after(self.rows[direction].get(link, ()), start):
            if row_start < end and task in alive:   # summed in row order
                load += row_rate
        if pending:
            load = _plus_overlapping(load, pending.get(link, ()), start, end)
        return load != 0 and load + rate > self.topology.capacities[direction][link] * (1 - SLACK)

    def on(self, direction: str, t: float, links: np.ndarray, only: set[int]) -> tuple[meeting.Segments, np.ndarray,
                                                                                     np.ndarray]:
        """The rows in flight from t on across the links `only` (of these flows' links, (n, m) padded with -1), in
        their one order: as a set of meeting.py's, each row a flow of one link, those links, (k, m) padded likewise,
        and each row's task (its serial number)."""
        alive, on = self.alive, self.rows[direction]
        rows = Rows.of([row for link in sorted(only) for row in _ending_after(on.get(link, ()), t) if row[4] in alive])
        segments, padded, order = _in_order(rows, t, links.shape[1])
        return segments, padded, rows.task[order]

    def kept(self, direction: str, t: float, kept: dict) -> "KeptRows | None":
        """The kept carried tasks (index -> contention.Carried) of a full solve at t, as their rows give them
        (contention._Standing's part); None where some is not held as it is (the solve reads its profile)."""
        held = self.held
        if not all((h := held.get(c.device)) is not None and h.timeline is c.timeline for c in kept.values()):
            return None
        return KeptRows(self, direction, t, kept)

    # ---- links.csv ----------------------------------------------------------------------------------------
    def take(self, t_end: float) -> list[tuple[str, int, float, float, float]]:
        """links.csv's rows (direction, link, t_start, t_end, Bps) from `since` to t_end: each link's summed rate
        from each instant it changes to the next, where some flow is on it; by start, then direction, then link.
        The rows' parts after t_end wait for the next."""
        taken, since = [], self.since
        before = t_end if since < t_end else -math.inf   # rows starting before it are logged (two aggregations
                                                          # at one instant: none between them)
        for code, on in enumerate(self.rows.values()):
            done = []
            for link, rows in on.items():
                if len(rows) > 1:
                    window = [row for row in rows if row[0] < before]
                else:
                    window = rows if rows[0][0] < before else ()
                if len(window) == 1:   # most links: one flow in flight, its rate alone
                    start, end, rate, _, _ = window[0]
                    taken.append((start if start > since else since, code, link, end if end < t_end else t_end, rate))
                elif window:
                    taken += _link_steps(code, link, window, since, t_end)
                if rows[0][1] <= t_end:   # those that end by t_end are taken whole
                    del rows[:bisect_right(rows, t_end, key=_END)]
                    if not rows:
                        done.append(link)
            for link in done:
                del on[link]
        self.since = t_end
        taken.sort(key=_START_CODE_LINK)   # a link has one row an instant: no ties
        return [(DIRECTIONS[code], link, start, end, bps) for start, code, link, end, bps in taken]

    # ---- a checkpoint -------------------------------------------------------------------------------------
    def saved(self) -> dict:
        """What a checkpoint keeps: the rows, each task in flight's serial number, end and offline instant, and
        `since` (plain values)."""
        return {"since": self.since, "serials": self.serials,
                "rows": {direction: [list(column) for column in zip(*self.all(direction))] or [[]] * len(Rows._fields)
                         for direction in self.rows},
                "held": {d: [h.end, h.offline_at, h.serial] for d, h in self.held.items()}}

    def restore(self, saved: dict) -> None:
        """A checkpoint's rows and tasks in flight, whose timelines `resume` hands back."""
        self.since, self.serials = saved["since"], saved.get("serials", 0)
        for direction, columns in saved.get("rows", {}).items():
            on = self.rows[direction] = {}
            for start, end, rate, link, task in zip(*columns):
                on.setdefault(int(link), []).append((float(start), float(end), float(rate), int(link), int(task)))
            for rows in on.values():   # an older testbed's checkpoint kept them in the order they came
                rows.sort(key=_END)
        self.held = {d: Held(None, end, offline_at, serial) for d, (end, offline_at, serial) in
                     saved.get("held", {}).items()}
        self.alive = {h.serial for h in self.held.values()}
        self.unsteady = {d for d, h in self.held.items() if h.end > h.offline_at}

    def resume(self, in_flight: dict) -> None:
        """The tasks in flight of a resumed run (device -> what has a .timeline): those the checkpoint held get
        their timelines back; others (an older testbed's checkpoint kept none) get their rows from `since`, and
        no offline instant yet, so the next dispatch solves in full and records one."""
        new = [d for d in in_flight if d not in self.held]
        for d in in_flight.keys() - set(new):
            self.held[d] = self.held[d]._replace(timeline=in_flight[d].timeline)
        self.add(new, [in_flight[d].timeline for d in new], [-math.inf] * len(new), self.since)


class KeptRows:
    """contention._Standing from the rows: the kept tasks that move bytes of one direction after t, their rate
    segments from t on, each row a flow of one link; a solve asks for those on the links its flows cross
    (`near`), which are all that meeting.OnLinks compares with them, unless `clear` shows first that none meets
    them at capacity (most often: a dispatch's few new tasks and the few they met, on their cells). The rows are
    read where asked (the kept tasks' rows on a link, any that moves, those near), made arrays only for `near`."""

    def __init__(self, flows: InFlightLinks, direction: str, t: float, kept: dict):
        self.t, self.n_links = t, len(flows.topology.capacity[direction])
        self.on, self.capacity = flows.rows[direction], flows.topology.capacities[direction]
        self.profile = attrgetter(_PROFILE[direction])
        self.index = {flows.held[c.device].serial: i for i, c in kept.items()}   # serial -> index
        self.taken: set[int] = set()   # the kept tasks taken in since (indices)
        self._all = lambda: flows.all(direction)
        self._near = np.zeros(0, dtype=np.int64)

    def moving(self) -> bool:
        """Some kept task not taken in moves bytes of this direction after t."""
        return next(self._mine(), None) is not None

    def _mine(self) -> Iterator[tuple[float, float, float, int, int]]:
        """The rows of the kept tasks not taken in that end after t, link by link."""
        index, taken, t = self.index, self.taken, self.t
        return (row for row in self._all() if row[1] > t and (i := index.get(row[4])) is not None and i not in taken)

    def of(self, timelines: list) -> meeting.Segments:
        """These timelines' flows of this direction as their earlier solve had them, from t on."""
        return meeting.of_profiles(list(map(self.profile, timelines)), self.t)

    def clear(self, *sets: tuple[meeting.Segments, np.ndarray]) -> bool:
        """Sets of flows (segments, as arrays or lists; each flow's links padded with -1: the solved ones, what the
        carried ones among them were) surely meet no kept row at capacity: each set's segments in turn, on each of
        their links where a kept row overlaps them, SLACK under the capacity with those rows and the set's segments
        before them (as InFlightLinks.unclear argues: at an instant a link carries at most what the last of its
        segments there was checked with). Then meeting.OnLinks finds no meeting; False where this does not show it."""
        for segments, links in sets:
            pending: dict[int, list[tuple[float, float, float]]] = {}
            rows = links.tolist()
            columns = (column.tolist() if isinstance(column, np.ndarray) else column for column in segments)
            for start, end, rate, flow in zip(*columns):
                if not self._clear_one(start, end, rate, rows[flow], pending):
                    return False
        return True

    def _clear_one(self, start: float, end: float, rate: float, links: list[int],
                   pending: dict[int, list[tuple[float, float, float]]]) -> bool:
        index, taken = self.index, self.taken
        for link in links:
            if link >= 0:
                load, met = 0.0, False
                for row_start, _, row_rate, _, task in _ending_after(self.on.get(link, ()), start):
                    if row_start < end and (i := index.get(task)) is not None and i not in taken:
                        load, met = load + row_rate, True
                if met and _plus_overlapping(load, pending.get(link, ()), start, end) + rate > \
                        self.capacity[link] * (1 - SLACK):
                    return False
        _join(pending, start, end, rate, links)
        return True

    def near(self, *links: np.ndarray) -> tuple[meeting.Segments, np.ndarray]:
        """The kept rows on any of these links ((n, m) arrays padded with -1), in their one order (as `on`)."""
        mine = list(self._mine())
        rows, owner = Rows.of(mine), np.array([self.index[row[4]] for row in mine], dtype=np.int64)
        pick = np.flatnonzero(_wanted(self.n_links, *links)[rows.link])
        segments, padded, order = _in_order(rows.where(pick), self.t, links[0].shape[1])
        self._near = owner[pick][order]
        return segments, padded

    def take(self, mask: np.ndarray) -> list[int]:
        """The tasks of the rows of `mask` (over the last `near`) leave the kept set; returns their indices."""
        return self._leave(np.unique(self._near[mask]).tolist())

    def take_serials(self, serials: list[int]) -> list[int]:
        """These tasks (serial numbers; each kept, with rows here) leave the kept set; returns their indices."""
        return self._leave(sorted({self.index[serial] for serial in serials}))

    def _leave(self, taken: list[int]) -> list[int]:
        self.taken.update(taken)
        return taken


def _rows(profiles: list, links: np.ndarray, t: float, serials: np.ndarray) -> list[tuple]:
    """The rows from t on of flows with these profiles, across these links ((n, m), padded with -1), of these
    tasks: each segment's row on each of its links, in turn."""
    segments = meeting.of_profiles(profiles, t)
    links = links[segments.flow]
    row, place = np.nonzero(links >= 0)
    return Rows(*(column[row] for column in segments[:3]), links[row, place], serials[segments.flow][row]).tuples()


def _link_steps(code: int, link: int, rows: list[tuple], since: float, t_end: float) -> list[tuple]:
    """take's rows (start, direction code, link, end, Bps) of one link from its rows in flight over [since, t_end):
    the summed rate of the rows on it from each instant it changes to the next, where some row is on it. Each sum
    is the rates' exact sum, rounded once (as math.fsum's: here as integers over one power-of-two denominator): it
    depends on the rows alone, not on their order, so a resumed run writes the unbroken run's bits, and a flow
    alone on a link is logged at its rate."""
    cut = [(start if start > since else since, end if end < t_end else t_end, rate.as_integer_ratio())
           for start, end, rate, _, _ in rows]
    scale = max(ratio[1] for _, _, ratio in cut)   # the rates' denominators are powers of two
    changes = sorted([(start, p * (scale // q), 1) for start, _, (p, q) in cut]
                     + [(end, -p * (scale // q), -1) for _, end, (p, q) in cut], key=_FIRST)
    steps, total, count, time = [], 0, 0, None
    for instant, delta, counted in changes:
        if instant != time:
            if count:
                steps.append((time, code, link, instant, total / scale))   # int / int: correctly rounded
            time = instant
        total, count = total + delta, count + counted
    return steps


def _insert(on: dict[int, list[tuple]], row: tuple) -> None:
    """A row into its link's list, by end (after those of the same end)."""
    rows = on.get(row[3])
    if rows is None:
        on[row[3]] = [row]
    elif rows[-1][1] <= row[1]:
        rows.append(row)
    else:
        insort(rows, row, key=_END)


def _join(pending: dict[int, list[tuple[float, float, float]]], start: float, end: float, rate: float,
          links: list[int]) -> None:
    """A flow checked clear joins the pending ones on its links (link -> (start, end, rate) of each)."""
    for link in links:
        if link >= 0:
            pending.setdefault(link, []).append((start, end, rate))


def _plus_overlapping(load: float, flows: list[tuple[float, float, float]], start: float, end: float) -> float:
    """`load` plus the rates of those of these flows (start, end, rate) whose spans meet [start, end), in turn."""
    for other_start, other_end, other_rate in flows:
        if other_start < end and other_end > start:
            load += other_rate
    return load


def _ending_after(rows: list[tuple], t: float) -> list[tuple]:
    """The rows of one link (by end) that end after t."""
    return rows[bisect_right(rows, t, key=_END):] if rows and rows[0][1] <= t else rows


def _wanted(n_links: int, *links: np.ndarray) -> np.ndarray:
    """A mask over the links and the padding (index -1, never wanted) of these (n, m) link arrays."""
    wanted = np.zeros(n_links + 1, dtype=bool)
    for each in links:
        wanted[each.ravel()] = True
    wanted[-1] = False
    return wanted


def _in_order(rows: Rows, t: float, width: int) -> tuple[meeting.Segments, np.ndarray, np.ndarray]:
    """Rows from t on in their one order (link, start, end, rate) as a set of meeting.py's, each row a flow of one
    link, its links padded to `width` with -1, and the order taken."""
    start = np.maximum(rows.start, t)
    order = np.lexsort((rows.rate, rows.end, start, rows.link))
    padded = np.full((len(order), width), -1, dtype=np.int64)
    padded[:, 0] = rows.link[order]
    return meeting.Segments(start[order], rows.end[order], rows.rate[order], np.arange(len(order))), padded, order
