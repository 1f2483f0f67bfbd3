"""Transfers through shared links as fluid processor sharing, solved exactly on the simulated clock.

A flow moves `bytes_` from `start_s` through zero or more shared links (capacity in bytes/s each) and is also
capped by its own rate (its device's private link). Between two events every flow moves at a constant rate; the
rates are the max-min fair allocation over all links at once (maxmin.max_min_rates), recomputed exactly at every
event: a flow starting, a flow finishing its bytes, a flow being stopped (`stop_s`: its device went offline, a
deadline). Events at one instant are taken together: flows that finish or are stopped at t leave, flows that
start at t join, and all share from t on. A flow finishing exactly at its stop instant is done.

A flow whose rate stays at its cap from start to end finishes at start_s + bytes_ / cap_Bps bit for bit, as it
would on a private link: a flow's finish is computed from the instant its rate last changed and the bytes it
still had then, and a rate that events leave unchanged is not re-anchored.

Continuing from an instant (an asynchronous server that adds flows as it goes): `flows.still_to_move(t)` gives the
flows that still move after t, each flow in flight as a new flow that starts at t with the bytes it had left
(`remaining_at`), the others as they were; solving those again, with any new flows, gives the same instants as one
solve of the whole to rounding (rates are constant between events; see tests/network/test_fluid.py).
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import chain

import numpy as np

from testbed.network import fluid_few
from testbed.network.maxmin import fair_rates, sorted_pairs
from testbed.network.uncongested import congested, first_congestion, loads_between


Profile = tuple[tuple[float, ...], tuple[float, ...]]   # a flow's (instants, bytes moved by each): linear between


def moved_by(profile: Profile, t: float) -> float:
    """Bytes a flow had moved by instant t, from its profile: 0 before its first instant, its last amount from its
    last instant (its end) on, linear in between (its rate is constant between breakpoints). np.interp over the
    two breakpoints around t alone (the same arithmetic on the same two points as over all of them), as a
    carried flow's profile (network/contention.py) grows by a few breakpoints at every dispatch."""
    times, moved = profile
    j = bisect_right(times, t)   # times are non-decreasing
    if j == 0:
        return 0.0
    if j == len(times):
        return float(moved[-1])
    return float(np.interp(t, times[j - 1:j + 1], moved[j - 1:j + 1]))


@dataclass(frozen=True, eq=False)
class Flows:
    """The solved flows: per flow (n,) arrays, each flow's breakpoints (the instants its rate changed), and each
    link's load between events."""
    start_s: np.ndarray
    bytes_: np.ndarray
    cap_Bps: np.ndarray
    end_s: np.ndarray       # when it finished its bytes or was cut
    done: np.ndarray        # it moved all its bytes
    moved: np.ndarray       # bytes moved by end_s: exactly bytes_ where done
    private_s: np.ndarray   # bytes_ / cap_Bps: its duration on a private link
    waited_s: np.ndarray    # what contention cost it: (end_s - start_s) - moved / cap_Bps (= private_s where done),
    #                         exactly 0 where it never ran below its cap
    breaks: np.ndarray      # (n + 1,) flow i's breakpoints are rows breaks[i]:breaks[i + 1] of the three below
    break_s: np.ndarray     # the instant its rate changed (the first is its start)
    break_moved: np.ndarray  # bytes it had moved by then
    break_Bps: np.ndarray   # its rate from then on
    event_s: np.ndarray     # (E,) the event instants
    load_Bps: np.ndarray    # (E, L) each link's summed rate from each event to the next

    def profile(self, i: int) -> Profile:
        """Flow i's breakpoints and its end, as (instants, bytes moved by each): what moved_by reads."""
        lo, hi = self.breaks[i], self.breaks[i + 1]
        return (tuple(self.break_s[lo:hi].tolist()) + (float(self.end_s[i]),),
                tuple(self.break_moved[lo:hi].tolist()) + (float(self.moved[i]),))

    def moved_by(self, i: int, t) -> np.ndarray | float:
        """Bytes flow i had moved by instant(s) t (moved_by below, on its profile)."""
        profile = self.profile(i)
        if np.ndim(t):
            return np.array([moved_by(profile, x) for x in np.asarray(t, dtype=float)])
        return moved_by(profile, float(t))

    def moved_at(self, t: float) -> np.ndarray:
        """Bytes every flow had moved by instant t, (n,)."""
        return np.array([self.moved_by(i, t) for i in range(len(self.start_s))])

    def remaining_at(self, t: float) -> np.ndarray:
        """Bytes every flow still had to move at instant t (its bytes where it had not started)."""
        return self.bytes_ - self.moved_at(t)

    def still_to_move(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For solving again from instant t: which flows still move after t (a mask), their start_s (t for those in
        flight) and their bytes_ (what they had left at t). Pass them with their caps, links and stops."""
        rest = self.end_s > t
        return rest, np.maximum(self.start_s[rest], t), self.remaining_at(t)[rest]

    def utilisation(self, link: int) -> tuple[np.ndarray, np.ndarray]:
        """Link's summed rate as a step function: from event_s[k] to event_s[k + 1] it carried Bps[k]."""
        return self.event_s, self.load_Bps[:, link]


def solve(start_s, bytes_, cap_Bps, links, capacity_Bps, stop_s=None, loads: bool = True,
          checked: bool = True) -> Flows:
    """Solve n flows: start_s (n,) instants, bytes_ (n,) >= 0, cap_Bps (n,) > 0 (finite), links (n, m) indices
    into capacity_Bps (L,) > 0 (inf allowed) padded with -1, stop_s (n,) instants when a flow is cut if not done
    (inf, or None for all: never). A flow stopped at or before its start moves nothing and ends at its start.
    Without `loads`, the links' loads are not logged (event_s and load_Bps empty): an asynchronous run's
    links.csv comes from the flows' rate segments (inflight.py), and logging them costs a solve a tenth.
    Without `checked`, the inputs are taken as they are: float arrays, links int64 (n, m), stop_s an array (what
    network/contention.py makes; the checks cost a dispatch's solve of a few flows a fifth)."""
    inputs = (_checked(start_s, bytes_, cap_Bps, links, capacity_Bps, stop_s) if checked else
              (start_s, bytes_, cap_Bps, links, capacity_Bps, stop_s))
    if not loads and len(inputs[0]) <= fluid_few.FEW_FLOWS:
        return _few(*inputs)
    run = _Run(*inputs, loads)
    with np.errstate(divide="ignore"):
        while run.next_mover < len(run.movers) or len(run.active):
            t = run.next_instant()
            run.leave(t)
            run.join(t)
            if not run.share(t):
                run.fast_forward(t)
    return run.flows()


class _Run:
    """The event loop's state: per flow the instant its rate last changed (its anchor), the bytes it had left
    then, its rate and its finish; the flows in flight, and those still to start in order of start."""

    def __init__(self, start, size, cap, links, capacity, stop, loads: bool = True):
        self.start, self.size, self.cap, self.links, self.capacity, self.stop = start, size, cap, links, capacity, stop
        n = len(start)
        self.end, self.done, self.moved = start.copy(), np.zeros(n, dtype=bool), np.zeros(n)
        idle = (size == 0) | (stop <= start)            # never take part in sharing: end at their start
        self.done[idle] = size[idle] == 0
        self.anchor_s, self.left, self.rate, self.finish = start.copy(), size.copy(), np.zeros(n), np.full(n, np.inf)
        movers = np.flatnonzero(~idle)
        self.movers = movers[np.argsort(start[movers], kind="stable")]
        self.next_mover, self.active = 0, np.zeros(0, dtype=np.int64)
        self.pair_flow, self.pair_link = sorted_pairs(cap, links)
        self.log = _Log(len(capacity), loads)

    def next_instant(self) -> float:
        active = self.active
        t = min(self.start[self.movers[self.next_mover]] if self.next_mover < len(self.movers) else np.inf,
                self.finish[active].min(initial=np.inf), self.stop[active].min(initial=np.inf))
        if t == np.inf:
            raise RuntimeError(f"{len(active)} flows stalled at rate 0 with nothing left to change it")
        return t

    def leave(self, t: float, before: bool = False) -> None:
        """The flows in flight that finish or are stopped at t (before t, where `before`) leave."""
        active = self.active
        ends = self.finish[active] < t if before else self.finish[active] <= t
        finished = ends & (self.finish[active] <= self.stop[active])
        cut = ~finished & ((self.stop[active] < t) if before else (self.stop[active] <= t))
        over = active[finished]
        self.end[over], self.done[over], self.moved[over] = self.finish[over], True, self.size[over]
        gone = active[cut]
        self.end[gone] = self.stop[gone]
        self.moved[gone] = self.size[gone] - self._left_at(gone, self.stop[gone])
        self.active = active[~(finished | cut)]

    def join(self, t: float) -> None:
        """The flows that start at t join."""
        joined = np.searchsorted(self.start[self.movers], t, side="right")
        self.active = np.concatenate([self.active, self.movers[self.next_mover:joined]])
        self.next_mover = joined

    def share(self, t: float) -> bool:
        """Max-min fair rates from t on; re-anchor only the flows whose rate changed. False where no link is
        congested (every flow at its cap)."""
        active, n_links = self.active, len(self.capacity)
        in_flight = np.zeros(len(self.start), dtype=bool)
        in_flight[active] = True
        live = in_flight[self.pair_flow]
        pair_flow, pair_link = self.pair_flow[live], self.pair_link[live]
        hot = congested(np.bincount(pair_link, weights=self.cap[pair_flow], minlength=n_links), self.capacity)
        new = self.cap[active]
        if hot.any():                                   # only the flows through a congested link share
            contended = np.zeros(len(self.start), dtype=bool)
            contended[pair_flow[hot[pair_link]]] = True
            keep = contended[pair_flow]
            fair = fair_rates(self.cap, pair_flow[keep], pair_link[keep], self.capacity)
            new = np.where(contended[active], fair[active], new)
        changed = active[new != self.rate[active]]
        self.left[changed] = self._left_at(changed, t)
        self.anchor_s[changed] = t
        self.rate[active] = new
        self.finish[changed] = t + self.left[changed] / self.rate[changed]
        self.log.changes.append((changed, np.full(len(changed), t), self.size[changed] - self.left[changed],
                                 self.rate[changed]))
        if self.log.keeps_loads:
            self.log.add_loads(np.array([t]), np.bincount(pair_link, weights=self.rate[pair_flow],
                                                          minlength=n_links)[None])
        return bool(hot.any())

    def fast_forward(self, t: float) -> None:
        """No link is congested at t: play, all at once, every event until a link is (uncongested.py)."""
        active, pending = self.active, self.movers[self.next_mover:]
        ever = np.concatenate([active, pending])
        begin = np.concatenate([np.full(len(active), t), self.start[pending]])
        private_end = self.start[pending] + self.size[pending] / self.cap[pending]
        end = np.minimum(np.concatenate([self.finish[active], private_end]), self.stop[ever])
        until = first_congestion(begin, end, self.cap[ever], self.links[ever], self.capacity)
        joined = pending[self.start[pending] < until]
        self.anchor_s[joined], self.rate[joined] = self.start[joined], self.cap[joined]
        self.finish[joined] = private_end[:len(joined)]
        self.log.changes.append((joined, self.start[joined], np.zeros(len(joined)), self.cap[joined]))
        self.active = np.concatenate([active, joined])
        self.next_mover += len(joined)
        self.leave(until, before=True)
        took = len(active) + len(joined)
        if self.log.keeps_loads:
            self.log.add_loads(*loads_between(t, until, begin[:took], end[:took], self.cap[ever[:took]],
                                              self.links[ever[:took]], len(self.capacity)))

    def _left_at(self, flows: np.ndarray, t) -> np.ndarray:
        return np.maximum(self.left[flows] - self.rate[flows] * (t - self.anchor_s[flows]), 0.0)

    def flows(self) -> Flows:
        return _flows(self.start, self.size, self.cap, self.end, self.done, self.moved, self.log)


def _few(start, size, cap, links, capacity, stop) -> Flows:
    """solve, without the links' loads, of a few flows: fluid_few's loop on lists, the same bits."""
    few = fluid_few.solve(start.tolist(), size.tolist(), cap.tolist(), links.tolist(), capacity.tolist(), stop.tolist())
    breaks = np.cumsum([0] + [len(times) for times in few.times])
    break_s, break_moved, break_Bps = (np.fromiter(chain.from_iterable(column), float, breaks[-1])
                                       for column in (few.times, few.moved_at, few.rates))
    return Flows(start, size, cap, np.array(few.end_s, dtype=float), np.array(few.done, dtype=bool),
                 np.array(few.moved, dtype=float), size / cap, np.array(few.waited_s, dtype=float), breaks, break_s,
                 break_moved, break_Bps, np.zeros(0), np.zeros((0, len(capacity))))


def _flows(start, size, cap, end, done, moved, log: "_Log") -> Flows:
    """The answer of a solve: its flows' ends, whether done, bytes moved and the log of its events."""
    n = len(start)
    breaks, break_s, break_moved, break_Bps = log.breakpoints(n)
    slowed = np.zeros(n, dtype=bool)                  # ran below its cap at some time
    slowed[np.repeat(np.arange(n), np.diff(breaks))[break_Bps < np.repeat(cap, np.diff(breaks))]] = True
    waited = np.where(slowed, (end - start) - moved / cap, 0.0)
    times, loads = log.loads_table()
    return Flows(start, size, cap, end, done, moved, size / cap, waited, breaks, break_s, break_moved, break_Bps,
                 times, loads)


def _checked(start_s, bytes_, cap_Bps, links, capacity_Bps, stop_s):
    """The inputs as float/int arrays, or a one-line ValueError naming what is wrong."""
    start = np.asarray(start_s, dtype=float).reshape(-1)
    n = len(start)
    size = np.asarray(bytes_, dtype=float).reshape(-1)
    cap = np.asarray(cap_Bps, dtype=float).reshape(-1)
    capacity = np.asarray(capacity_Bps, dtype=float).reshape(-1)
    stop = np.full(n, np.inf) if stop_s is None else np.asarray(stop_s, dtype=float).reshape(-1)
    links = np.asarray(links)
    if links.size == 0:
        links = np.zeros((n, links.shape[1] if links.ndim == 2 else 0), dtype=np.int64)
    for name, arr in (("bytes_", size), ("cap_Bps", cap), ("stop_s", stop)):
        if len(arr) != n:
            raise ValueError(f"{name} has {len(arr)} values for {n} flows (start_s); give one per flow")
    if links.ndim != 2 or len(links) != n or links.dtype.kind not in "iu":
        raise ValueError(f"links must be an integer array of shape ({n}, m), padded with -1; got {links.dtype} "
                         f"of shape {links.shape}")
    if not np.isfinite(start).all():
        raise ValueError("start_s must be finite instants")
    if (np.isnan(size) | (size < 0) | np.isinf(size)).any():
        raise ValueError(f"bytes_ must be finite and >= 0; got {size[~(size >= 0) | np.isinf(size)][0]}")
    if not ((cap > 0) & np.isfinite(cap)).all():
        raise ValueError(f"cap_Bps must be finite and > 0; got {cap[~((cap > 0) & np.isfinite(cap))][0]}")
    if not (capacity > 0).all():
        raise ValueError(f"capacity_Bps must be > 0 (inf: never binds); got {capacity[~(capacity > 0)][0]}")
    if np.isnan(stop).any():
        raise ValueError("stop_s must be instants or inf (never), not NaN")
    if links.size and ((links < -1) | (links >= len(capacity))).any():
        bad = links[(links < -1) | (links >= len(capacity))][0]
        raise ValueError(f"links names link {bad}, but there are {len(capacity)} links (0 to {len(capacity) - 1}; "
                         f"-1 pads)")
    ordered = np.sort(links, axis=1)
    if (ordered[:, 1:] == ordered[:, :-1])[ordered[:, 1:] >= 0].any():
        raise ValueError("a flow lists the same link twice in links; list each link once")
    return start, size, cap, links.astype(np.int64), capacity, stop


class _Log:
    """What the event loop records: each flow's rate changes and each link's load between events."""

    def __init__(self, n_links: int, keeps_loads: bool = True):
        self.n_links, self.keeps_loads = n_links, keeps_loads
        self.times: list[np.ndarray] = []
        self.loads: list[np.ndarray] = []
        self.changes: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def add_loads(self, times: np.ndarray, loads: np.ndarray) -> None:
        self.times.append(times)
        self.loads.append(loads)

    def loads_table(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.times:
            return np.zeros(0), np.zeros((0, self.n_links))
        return np.concatenate(self.times), np.concatenate(self.loads)

    def breakpoints(self, n):
        """breaks (n + 1,) and the breakpoints' instants, bytes moved and rates, grouped by flow in time order."""
        flow, at, moved, rates = (np.concatenate(column) for column in zip(*self.changes)) if self.changes \
            else (np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), np.zeros(0))
        order = np.argsort(flow, kind="stable")       # logged in time order
        breaks = np.concatenate([[0], np.cumsum(np.bincount(flow, minlength=n))])
        return breaks, at[order], moved[order], rates[order]
