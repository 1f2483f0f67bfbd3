"""How long flows can all move at their own caps: the first instant a shared link's demand exceeds its capacity.

While the caps of the flows on every link sum to no more than its capacity, no link binds: each flow moves at its
cap, independently of the others, and ends at its start plus its bytes over its cap (or at its stop). Given
flows as intervals [begin, end) at their caps, the links' demand is a step function of time; the solver plays all
events before the first instant where some link's demand (after every change at that instant) exceeds its
capacity at once, vectorised, instead of one event at a time.
"""
from __future__ import annotations

from operator import itemgetter

import numpy as np

# demand within this relative margin of a capacity counts as congestion: the exact solver then decides (at caps)
MARGIN = 1e-12
_LINK_TIME = itemgetter(0, 1)   # a change's link and instant: link_steps' order
_TRUE = np.ones(1, dtype=bool)   # np.append's one element, without its two calls (a dispatch steps links twice)


def congested(demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Which links the summed caps `demand` could fill."""
    return demand > capacity * (1 - MARGIN)


def first_congestion(begin, end, cap, links, capacity) -> float:
    """The first instant at which the flows, each at its cap over [begin_i, end_i), congest a link (inf: never)."""
    rows, cols = np.nonzero(links >= 0)
    if not len(rows):
        return np.inf
    on = links[rows, cols]
    time, link, demand = link_steps(np.concatenate([begin[rows], end[rows]]), np.concatenate([on, on]),
                                    np.concatenate([cap[rows], -cap[rows]])[:, None], len(capacity))
    return float(time[congested(demand[:, 0], capacity[link])].min(initial=np.inf))


def link_steps(time, link, delta, n_links) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step functions, one a link, from changes: `delta` (k, c) added on `link` (k,) at `time` (k,). Per link and
    instant where some change falls, the c running sums after all changes there, as (instants, links, (e, c) sums),
    by link, then instant."""
    order = np.lexsort((time, link))
    time, link, delta = time[order], link[order], delta[order]
    total = np.cumsum(delta, axis=0)
    count = np.bincount(link, minlength=n_links)
    before = np.concatenate([np.zeros((1, delta.shape[1])), total])[(np.cumsum(count) - count)[link]]
    last = np.concatenate([(link[1:] != link[:-1]) | (time[1:] != time[:-1]), _TRUE])  # after all changes at an instant
    return time[last], link[last], (total - before)[last]


def link_steps_few(changes: list[tuple[int, float, float, float]]) -> list[tuple[float, int, float, float]]:
    """link_steps of a few changes (link, instant, two deltas), in Python floats: sorted as np.lexsort sorts
    them (stable: by link, then instant) and summed in turn as np.cumsum sums them, each link's sums less those
    before it; per link and instant where some change falls, (instant, link, sum, sum) after all changes there.
    The same bits as the arrays' where a link's first change is no -0.0 (a flow's start: its rate or cap)."""
    changes = sorted(changes, key=_LINK_TIME)
    steps, total, count, before_total, before_count, link, time = [], 0.0, 0.0, 0.0, 0.0, None, None
    for next_link, next_time, delta, counted in changes:
        if next_time != time or next_link != link:   # the instant before is done: its step, after all changes there
            if link is not None:
                steps.append((time, link, total - before_total, count - before_count))
            if next_link != link:
                before_total, before_count, link = total, count, next_link
            time = next_time
        total, count = total + delta, count + counted
    if link is not None:
        steps.append((time, link, total - before_total, count - before_count))
    return steps


def loads_between(after, until, begin, end, cap, links, n_links) -> tuple[np.ndarray, np.ndarray]:
    """The instants in (after, until) where a flow begins or ends, and every link's summed rate from each on,
    (E,) and (E, n_links), for flows at their caps over [begin_i, end_i)."""
    instants = np.unique(np.concatenate([begin, end]))
    instants = instants[(instants > after) & (instants < until)]
    rows, cols = np.nonzero(links >= 0)
    on = links[rows, cols]
    # a flow loads a link from the first instant at or after its begin to the first at or after its end
    first = np.searchsorted(instants, begin[rows])
    last = np.searchsorted(instants, end[rows])
    e, width = len(instants), n_links
    change = np.bincount(first * width + on, weights=cap[rows], minlength=(e + 1) * width) \
        - np.bincount(last * width + on, weights=cap[rows], minlength=(e + 1) * width)
    return instants, np.cumsum(change.reshape(e + 1, width), axis=0)[:e]
