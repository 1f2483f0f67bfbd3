"""When flows solved apart are the solve of them all, and which kept flows a re-solve must take in.

Two sets of flows, each solved alone (fluid.solve), are together the solve of both wherever no link carries flows
of both sets at an instant when their summed rates reach its capacity (within `MARGIN`): each flow is then at its
cap or crosses a link that its own set alone fills, where no flow has a larger rate, which is max-min fairness of
the whole; the allocation is unique at every instant, so the two trajectories are the joint one. Rates are
constant between a set's breakpoints, so the instants where some flow's rate changes on a link are all there is
to check.

An asynchronous dispatch (contention.py) solves its new flows, with the carried flows whose earlier solve no
longer stands, and keeps the other carried flows' earlier solve. Where the two sets meet at capacity on a link,
every kept flow on that link is taken in and the taken set solved again, until they meet nowhere: the answer is
the one solve of all the flows, to rounding, at the cost of the flows that share a binding link with the new ones.

A set of flows is given here as segments: (start, end, rate, flow) arrays, a flow's rate constant over
[start, end), and each flow's links as a row of link indices padded with -1 (topology.links).
"""
from __future__ import annotations

import math
from itertools import chain
from typing import NamedTuple

import numpy as np

from testbed.network import fluid_few
from testbed.network.uncongested import link_steps

# looser than uncongested.MARGIN: loads summed over many links' cumulative sums round in their last digits, and
# a meeting found where there is none costs only a larger solve
MARGIN = 1e-9


class Segments(NamedTuple):
    start: np.ndarray
    end: np.ndarray
    rate: np.ndarray
    flow: np.ndarray   # the segment's flow: a row of the set's links


# no segments (a dispatch's re-solved carried flows are most often none: a dozen numpy calls saved, twice)
NONE = Segments(np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64))


def of_solved(flows) -> Segments:
    """A fluid.Flows' (or fluid_few.Few's) rate segments: each breakpoint's rate until the next breakpoint, the last
    until the end. Flows solved `alone` have one breakpoint each that moves: its segment runs to its end (the same
    rows, in 2 calls)."""
    if isinstance(flows, Apart):
        return Segments(flows.break_s, flows.end_s[flows.movers], flows.break_Bps, flows.movers)
    if isinstance(flows, fluid_few.Few):
        start, end, rate, flow = flows.segments()
        return Segments(np.array(start, dtype=float), np.array(end, dtype=float), np.array(rate, dtype=float),
                        np.array(flow, dtype=np.int64))
    n = len(flows.start_s)
    owner = np.repeat(np.arange(n), np.diff(flows.breaks))
    end = np.append(flows.break_s[1:], 0.0)
    last = flows.breaks[1:][np.diff(flows.breaks) > 0] - 1
    end[last] = flows.end_s[owner[last]]
    return Segments(flows.break_s, end, flows.break_Bps, owner)


def of_profiles(profiles: list[tuple[tuple[float, ...], tuple[float, ...]]], t: float) -> Segments:
    """Profiles' (instants, bytes moved by each) rate segments from instant t on: the slope between two
    breakpoints, clipped to start no earlier than t; segments of no length or wholly before t are left out."""
    if len(profiles) <= FEW:
        return _of_few_profiles(profiles, t)
    instants, amounts = zip(*profiles) if profiles else ((), ())
    lengths = np.fromiter(map(len, instants), np.int64, len(profiles))
    times = np.fromiter(chain.from_iterable(instants), float, int(lengths.sum()))
    moved = np.fromiter(chain.from_iterable(amounts), float, len(times))
    owner = np.repeat(np.arange(len(profiles)), lengths)
    pair = owner[1:] == owner[:-1]               # point j and j + 1 are one flow's
    start, end = times[:-1][pair], times[1:][pair]
    keep = end > np.maximum(start, t)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = (moved[1:][pair] - moved[:-1][pair]) / (end - start)
    return Segments(np.maximum(start, t)[keep], end[keep], rate[keep], owner[:-1][pair][keep])


def _of_few_profiles(profiles: list[tuple[tuple[float, ...], tuple[float, ...]]], t: float) -> Segments:
    """of_profiles, breakpoint by breakpoint (a dispatch's few new tasks): the same arithmetic, the same bits."""
    start, end, rate, flow = list(zip(*few_segments(profiles, t))) or ((),) * 4
    return Segments(np.array(start, dtype=float), np.array(end, dtype=float), np.array(rate, dtype=float),
                    np.array(flow, dtype=np.int64))


def few_segments(profiles: list[tuple[tuple[float, ...], tuple[float, ...]]],
                 t: float) -> list[tuple[float, float, float, int]]:
    """of_profiles' segments as Python tuples (start, end, rate, flow), for a few profiles."""
    return [(max(s, t), e, (m1 - m0) / (e - s), i) for i, (times, moved) in enumerate(profiles)
            for s, e, m0, m1 in zip(times, times[1:], moved, moved[1:]) if e > max(s, t)]


class Apart(NamedTuple):
    """Flows each solved as if alone on its links, in the fields of fluid.Flows that a solve's reader takes."""
    start_s: np.ndarray
    end_s: np.ndarray
    moved: np.ndarray
    done: np.ndarray
    waited_s: np.ndarray
    breaks: np.ndarray
    break_s: np.ndarray
    break_moved: np.ndarray
    break_Bps: np.ndarray
    movers: np.ndarray   # the flows that move, one breakpoint each


def alone(start, size, cap, links, capacity, stop) -> Apart:
    """Each flow as fluid.solve gives a flow with no other on its links: from its start at the smaller of its cap
    and its links' capacities, ending at start + bytes / rate, or cut at its stop (fluid.py's arithmetic: the
    same instants and bytes, bit for bit); one that moves nothing (no bytes, stopped by its start) ends there."""
    if len(start) <= FEW:
        return _alone_few(start, size, cap, links, capacity, stop)
    limit = np.where(links >= 0, capacity[np.maximum(links, 0)], np.inf).min(axis=1, initial=np.inf)
    rate = np.minimum(cap, limit)
    idle = (size == 0) | (stop <= start)
    with np.errstate(divide="ignore"):
        finish = start + size / rate
    done = np.where(idle, size == 0, finish <= stop)
    end = np.where(idle, start, np.where(done, finish, stop))
    moved = np.where(idle, 0.0, np.where(done, size, size - np.maximum(size - rate * (stop - start), 0.0)))
    waited = np.where(~idle & (rate < cap), (end - start) - moved / cap, 0.0)
    movers = np.flatnonzero(~idle)
    breaks = np.concatenate([[0], np.cumsum(~idle)])
    return Apart(start, end, moved, done, waited, breaks, start[movers], np.zeros(len(movers)), rate[movers], movers)


# flows up to which `alone` takes Python floats: a dispatch solves a few new flows, and two dozen numpy calls on
# arrays that short cost more than the arithmetic (which is IEEE double either way: the same bits; min and max
# pick as np.minimum and np.maximum do)
FEW = 8


def _alone_few(start, size, cap, links, capacity, stop) -> Apart:
    """`alone`, flow by flow."""
    caps = capacity.tolist()
    flows = [alone_one(s, b, c, row, z, caps) for s, b, c, row, z in zip(start.tolist(), size.tolist(),
                                                                          cap.tolist(), links.tolist(), stop.tolist())]
    end, moved, done, waited, rates = zip(*flows) if flows else ((),) * 5
    movers = [i for i, rate in enumerate(rates) if rate is not None]
    breaks = np.cumsum([0] + [rate is not None for rate in rates])   # flow i moves at row breaks[i]: Flows' layout
    return Apart(start, np.array(end, dtype=float), np.array(moved, dtype=float), np.array(done, dtype=bool),
                 np.array(waited, dtype=float), breaks.astype(np.int64), start[movers], np.zeros(len(movers)),
                 np.array([rates[i] for i in movers], dtype=float), np.array(movers, dtype=np.int64))


def alone_one(s: float, b: float, c: float, row: list[int], z: float,
              caps: list[float]) -> tuple[float, float, bool, float, float | None]:
    """One flow from s of b bytes, capped at c, across the links `row` (-1: none) of capacities `caps`, stopped
    at z, alone on them, in Python floats: (end, moved, done, waited, its rate; None where it does not move)."""
    return alone_within(s, b, c, min([caps[link] for link in row if link >= 0], default=math.inf), z)


def alone_within(s: float, b: float, c: float, limit: float,
                 z: float) -> tuple[float, float, bool, float, float | None]:
    """alone_one where the smallest capacity of its links is `limit` (inf: it crosses none)."""
    rate = min(c, limit)
    if b == 0 or z <= s:   # idle
        return s, 0.0, b == 0, 0.0, None
    finish = s + b / rate
    ok = finish <= z
    end = finish if ok else z
    moved = b if ok else b - max(b - rate * (z - s), 0.0)
    return end, moved, ok, (end - s) - moved / c if rate < c else 0.0, rate


_INF = np.array([np.inf])           # a link's last row goes on
_UP_DOWN = np.array([1.0, -1.0])   # a segment's flow count rises at its start and falls at its end


def _changes(sets: tuple[tuple[Segments, np.ndarray], ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """link_steps' changes of these sets: where each segment starts and ends on each of its links, the set's summed
    rate (column 2 x its place) and flow count (the next column) rising there and falling back. All sets' starts
    come first, then their ends, each set's in its own order: a column's sums depend on its own set's order alone
    (the others add zeros), so this gives the bits a set after set listing gives, in a dozen fewer calls."""
    sets = [(2 * column, segments, flow_links[segments.flow])
            for column, (segments, flow_links) in enumerate(sets) if len(segments.flow)]
    of_segment = np.concatenate([on for _, _, on in sets])
    rows, cols = np.nonzero(of_segment >= 0)
    on = of_segment[rows, cols]
    column = np.concatenate([np.full(len(segments.flow), c) for c, segments, _ in sets])[rows]
    rate = np.concatenate([segments.rate for _, segments, _ in sets])[rows]
    k = len(rows)
    change = np.zeros((2 * k, 6))
    change[np.arange(2 * k), np.concatenate([column, column])] = np.concatenate([rate, -rate])
    change[np.arange(2 * k), np.concatenate([column, column]) + 1] = np.repeat(_UP_DOWN, k)
    times = np.concatenate([np.concatenate([segments.start for _, segments, _ in sets])[rows],
                            np.concatenate([segments.end for _, segments, _ in sets])[rows]])
    return times, np.concatenate([on, on]), change


class OnLinks:
    """Three sets of flows on the links: the `solved` ones, what the carried ones among them were before this
    solve (`was`), and the `kept` ones. Per link, at every instant some segment on it begins or ends, each set's
    summed rate and flow count after all changes there (link_steps: by link, then instant)."""

    def __init__(self, solved: tuple[Segments, np.ndarray], was: tuple[Segments, np.ndarray],
                 kept: tuple[Segments, np.ndarray], capacity: np.ndarray):
        self.solved_links, self.kept_links, self.n_links = solved[1], kept[1], len(capacity)
        self.instants, self.links, values = link_steps(*_changes((solved, was, kept)), len(capacity))
        self.solved_load, self.solved_count = values[:, 0], values[:, 1]
        was_load, was_count = values[:, 2], values[:, 3]
        self.kept_load, self.kept_count = values[:, 4], values[:, 5]
        full = capacity[self.links] * (1 - MARGIN)
        with_kept = self.kept_count > 0.5
        self.met = with_kept & (((self.solved_count > 0.5) & (self.solved_load + self.kept_load > full))
                                | ((was_count > 0.5) & (was_load + self.kept_load > full)))
        self.crowded = (self.solved_count > 1.5) & (self.solved_load > full)

    def apart_fails(self) -> bool:
        """Flows solved each alone (`alone`) are not their solve together: two of them are on a link at once
        whose capacity their summed rates reach."""
        return bool(self.crowded.any())

    def meeting(self) -> np.ndarray:
        """The kept flows to take in, a mask over the kept set's links: every kept flow on a link where, at some
        instant, kept flows and solved ones, or kept flows and what the solved carried ones were, are on it at once
        and reach its capacity (the kept flows' solve was made with those as they were)."""
        return self._marked(self.links[self.met])[self.kept_links].any(axis=1)

    def _marked(self, links: np.ndarray) -> np.ndarray:
        """A mask over the links and the padding (index -1, never marked) of these links: np.isin's answer by
        indexing, without its sort (a few calls a dispatch)."""
        mark = np.zeros(self.n_links + 1, dtype=bool)
        mark[links] = True
        mark[-1] = False
        return mark

    def usage_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """links.csv's rows (link, t_start, t_end, Bps), as columns, of the links the solved flows cross: the solved
        and kept flows' summed rate from each instant it changes on the link to the next, where some flow is on it."""
        on = self._marked(self.solved_links.ravel())[self.links]
        instants, links = self.instants[on], self.links[on]
        ends = np.concatenate([np.where(links[1:] == links[:-1], instants[1:], np.inf), _INF])
        busy = (self.solved_count + self.kept_count)[on] > 0.5
        load = (self.solved_load + self.kept_load)[on]
        order = np.lexsort((links[busy], instants[busy]))    # by instant, then link, as Usage.add gives a solve's
        return links[busy][order], instants[busy][order], ends[busy][order], load[busy][order]
