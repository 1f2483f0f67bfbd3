"""fluid.solve's event loop for a few flows, in Python floats: the same arithmetic in the same order, the same bits.

An asynchronous dispatch through shared links solves a few flows at a time (the new ones and the carried ones
they meet: 2-20), where the event loop's ~60 numpy calls an event cost more than their arithmetic. This
plays the loop of fluid._Run step for step on lists: the events, the flows that leave, join and share at each,
the max-min fair rates (maxmin.fair_rates: its rounds, its running sums), the first congestion when none binds
(uncongested.first_congestion) and each flow's bytes left, each computed by the same IEEE double operations in
the same order as the arrays' (np.cumsum and np.bincount add in sequence from 0.0; np.minimum and np.maximum
pick as min and max do). tests/network/test_fluid_few.py checks every field of the answer against the arrays' on
random sets of flows. It does not log the links' loads: it serves solves without them (fluid.solve's `loads`).
"""
from __future__ import annotations

import math
from typing import NamedTuple

from testbed.network.uncongested import MARGIN, link_steps_few

# flows up to which fluid.solve takes this loop (a 30-aggregation FedBuff run's solves through 100 cells, replayed:
# 2-3x faster than the arrays' loop at 3-20 flows, 1.1-1.2x at 48-53, 0.7x at 100)
FEW_FLOWS = 24


class Few(NamedTuple):
    """A solve of a few flows, as lists: each flow's end, bytes moved, whether done, what contention cost it
    (fluid.Flows' waited_s), and its breakpoints (the instants its rate changed, bytes moved by each, rate from
    each; as fluid.Flows groups them: by flow, each in time order)."""

    end_s: list[float]
    moved: list[float]
    done: list[bool]
    waited_s: list[float]
    times: list[tuple[float, ...]]
    moved_at: list[tuple[float, ...]]
    rates: list[tuple[float, ...]]

    def segments(self) -> tuple[list[float], list[float], list[float], list[int]]:
        """meeting.of_solved's segments (start, end, rate, flow) as lists: each breakpoint's rate until the next,
        the last until the flow's end."""
        start, end, rate, flow = [], [], [], []
        for i, (times, rates, last) in enumerate(zip(self.times, self.rates, self.end_s)):
            start += times
            end += times[1:] + (last,) if times else ()
            rate += rates
            flow += [i] * len(times)
        return start, end, rate, flow


def solve(start: list[float], size: list[float], cap: list[float], links: list[list[int]], capacity: list[float],
          stop: list[float]) -> Few:
    """fluid.solve of these flows without the links' loads, on lists (inputs as fluid.solve takes them, checked
    by the caller): the same bits as its arrays (waited_s: fluid._flows' arithmetic)."""
    end, done, moved, changes = _Loop(start, size, cap, links, capacity, stop).run()
    breaks: list[list[tuple[int, float, float, float]]] = [[] for _ in start]
    for change in changes:   # in time order: a stable grouping by flow, as np.argsort's
        breaks[change[0]].append(change)
    times, moved_at, rates, waited = [], [], [], []
    for i, flow in enumerate(breaks):
        times.append(tuple(change[1] for change in flow))
        moved_at.append(tuple(change[2] for change in flow))
        rates.append(tuple(change[3] for change in flow))
        slowed = any(rate < cap[i] for rate in rates[-1])   # ran below its cap at some time
        waited.append((end[i] - start[i]) - moved[i] / cap[i] if slowed else 0.0)
    return Few(end, moved, done, waited, times, moved_at, rates)


class _Loop:
    """fluid._Run on lists: per flow its anchor, bytes left then, rate and finish; the flows in flight in the
    order they joined; the (flow, link) pairs by link, then the flow's cap, then the flow (maxmin.sorted_pairs)."""

    def __init__(self, start, size, cap, links, capacity, stop):
        self.start, self.size, self.cap, self.capacity, self.stop = start, size, cap, capacity, stop
        n = len(start)
        idle = [size[i] == 0 or stop[i] <= start[i] for i in range(n)]
        self.end, self.done, self.moved = list(start), [idle[i] and size[i] == 0 for i in range(n)], [0.0] * n
        self.anchor, self.left, self.rate, self.finish = list(start), list(size), [0.0] * n, [math.inf] * n
        self.movers = sorted((i for i in range(n) if not idle[i]), key=start.__getitem__)   # stable, as argsort's
        self.next_mover, self.active = 0, []
        self.pairs = sorted(((link, cap[i], i) for i in range(n) for link in links[i] if link >= 0))
        self.links = [[link for link in row if link >= 0] for row in links]
        self.changes: list[tuple[int, float, float, float]] = []

    def run(self):
        while self.next_mover < len(self.movers) or self.active:
            t = self.next_instant()
            self.leave(t)
            self.join(t)
            if not self.share(t):
                self.fast_forward(t)
        return self.end, self.done, self.moved, self.changes

    def next_instant(self) -> float:
        first = self.start[self.movers[self.next_mover]] if self.next_mover < len(self.movers) else math.inf
        t = min(first, min((self.finish[i] for i in self.active), default=math.inf),
                min((self.stop[i] for i in self.active), default=math.inf))
        if t == math.inf:
            raise RuntimeError(f"{len(self.active)} flows stalled at rate 0 with nothing left to change it")
        return t

    def leave(self, t: float, before: bool = False) -> None:
        stays = []
        for i in self.active:
            finish, stop = self.finish[i], self.stop[i]
            if (finish < t if before else finish <= t) and finish <= stop:
                self.end[i], self.done[i], self.moved[i] = finish, True, self.size[i]
            elif stop < t if before else stop <= t:
                self.end[i] = stop
                self.moved[i] = self.size[i] - self._left_at(i, stop)
            else:
                stays.append(i)
        self.active = stays

    def join(self, t: float) -> None:
        while self.next_mover < len(self.movers) and self.start[self.movers[self.next_mover]] <= t:
            self.active.append(self.movers[self.next_mover])
            self.next_mover += 1

    def share(self, t: float) -> bool:
        """Max-min fair rates from t on, as fluid._Run.share: only flows through a congested link share."""
        in_flight = set(self.active)
        live = [(link, c, i) for link, c, i in self.pairs if i in in_flight]
        demand = _sums((link, c) for link, c, _ in live)
        hot = {link for link, total in demand.items() if total > self.capacity[link] * (1 - MARGIN)}
        fair = {}
        if hot:
            contended = {i for link, _, i in live if link in hot}
            fair = _fair_rates([p for p in live if p[2] in contended], self.capacity)
        changed = [i for i in self.active if fair.get(i, self.cap[i]) != self.rate[i]]
        for i in changed:
            self.left[i] = self._left_at(i, t)
            self.anchor[i] = t
        for i in self.active:
            self.rate[i] = fair.get(i, self.cap[i])
        for i in changed:
            rate = self.rate[i]
            self.finish[i] = t + self.left[i] / rate if rate else (math.inf if self.left[i] else math.nan)
            self.changes.append((i, t, self.size[i] - self.left[i], rate))
        return bool(hot)

    def fast_forward(self, t: float) -> None:
        """No link is congested at t: every event until one is, at once (fluid._Run.fast_forward)."""
        pending = self.movers[self.next_mover:]
        ever = self.active + pending
        private_end = [self.start[i] + self.size[i] / self.cap[i] for i in pending]
        end = [min(e, self.stop[i]) for e, i in zip([self.finish[i] for i in self.active] + private_end, ever)]
        begin = [t] * len(self.active) + [self.start[i] for i in pending]
        until = self._first_congestion(begin, end, ever)
        joined = [i for i in pending if self.start[i] < until]
        for i, finish in zip(joined, private_end):
            self.anchor[i], self.rate[i], self.finish[i] = self.start[i], self.cap[i], finish
            self.changes.append((i, self.start[i], 0.0, self.cap[i]))
        self.active += joined
        self.next_mover += len(joined)
        self.leave(until, before=True)

    def _first_congestion(self, begin: list[float], end: list[float], ever: list[int]) -> float:
        """uncongested.first_congestion: each link's demand after all changes at an instant, from one running
        sum over the changes by link, then instant (starts before ends at a tie, as concatenated)."""
        changes = [(link, begin[k], self.cap[i], 0.0) for k, i in enumerate(ever) for link in self.links[i]]
        changes += [(link, end[k], -self.cap[i], 0.0) for k, i in enumerate(ever) for link in self.links[i]]
        return min((time for time, link, demand, _ in link_steps_few(changes)
                    if demand > self.capacity[link] * (1 - MARGIN)), default=math.inf)

    def _left_at(self, i: int, t: float) -> float:
        return max(self.left[i] - self.rate[i] * (t - self.anchor[i]), 0.0)


def _sums(pairs) -> dict:
    """Per key, its values summed in order from 0.0 (np.bincount's weights)."""
    sums: dict = {}
    for key, value in pairs:
        sums[key] = sums.get(key, 0.0) + value
    return sums


def _fair_rates(pairs: list[tuple[int, float, int]], capacity: list[float]) -> dict[int, float]:
    """maxmin.fair_rates of the flows of these pairs (link, cap, flow), in their order: flow -> rate."""
    rate, fixed_load = {}, {}
    while pairs:
        level = _fill_levels(pairs, fixed_load, capacity)
        flow_level: dict[int, float] = {}
        for link, _, i in pairs:
            flow_level[i] = min(flow_level.get(i, math.inf), level[link])
        lowest_around: dict[int, float] = {}
        for link, _, i in pairs:
            lowest_around[link] = min(lowest_around.get(link, math.inf), flow_level[i])
        filling = {link for link, x in level.items() if math.isfinite(x) and x <= lowest_around[link]}
        fixing = {i for link, c, i in pairs if c <= flow_level[i] or link in filling}
        for link, c, i in pairs:
            if i in fixing and i not in rate:
                rate[i] = min(c, flow_level[i])
        for link, total in _sums((link, rate[i]) for link, _, i in pairs if i in fixing).items():
            fixed_load[link] = fixed_load.get(link, 0.0) + total
        pairs = [p for p in pairs if p[2] not in fixing]
    return rate


def _fill_levels(pairs: list[tuple[int, float, int]], fixed_load: dict, capacity: list[float]) -> dict[int, float]:
    """maxmin._fill_levels: per link of the pairs, the level at which it fills (inf where it cannot), from the
    running sum of the caps over all pairs in order, less its value at the link's first pair."""
    count: dict[int, int] = {}
    for link, _, _ in pairs:
        count[link] = count.get(link, 0) + 1
    running, base, rank, previous = 0.0, 0.0, 0, None
    capped_sum: dict[int, float] = {}
    n_capped: dict[int, int] = {}
    for link, c, _ in pairs:
        running += c
        below = running - c
        if link != previous:
            base, rank, previous = below, 0, link
        below -= base
        load = fixed_load.get(link, 0.0) + below + (count[link] - rank) * c
        if load < capacity[link]:
            capped_sum[link] = capped_sum.get(link, 0.0) + c
            n_capped[link] = n_capped.get(link, 0) + 1
        rank += 1
    level = {}
    for link, k in count.items():
        rising = k - n_capped.get(link, 0)
        level[link] = (max(capacity[link] - fixed_load.get(link, 0.0) - capped_sum.get(link, 0.0), 0.0) / rising
                       if rising > 0 else math.inf)
    return level
