"""Instantaneous max-min fair rates of flows through shared links, each flow also capped by its own rate.

The allocation is progressive filling (water-filling) over all links at once: every flow's rate rises together
from zero; a flow stops rising when it reaches its own cap or when one of its links is full, and the others go
on. The result is the unique max-min fair allocation: every flow is at its cap or crosses a full link on which
no flow has a larger rate.

Computed a link at a time rather than a level at a time, so that thousands of distinct caps cost no more rounds
than a few links: given the flows already fixed, a link l fills when
    fixed_l + sum over its free flows i of min(cap_i, x) = capacity_l,
a piecewise-linear equation in the common level x solved exactly from the free flows' caps in ascending order.
Levels only rise as other flows get fixed, so every link whose level is the lowest among the links of all its
flows (a local minimum) fills at that level: all of them are fixed in the same round, and so is every flow whose
cap is below all its links' levels (it ends at its cap). Each round fixes at least the lowest link, so there are
at most as many rounds as links, and a handful where links are cells behind one server link.

A flow that reaches its cap gets cap_i itself, bit for bit: a flow alone on links it cannot fill moves exactly
as it would on a private link.
"""
from __future__ import annotations

import numpy as np


def max_min_rates(cap: np.ndarray, links: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Rates (k,) of k flows with caps `cap` (k,) > 0 through `links` (k, m) (link indices, padded with -1) of
    `capacity` (L,) > 0 bytes/s (inf: a link that never fills). Inputs are trusted: fluid.solve validates them."""
    rate = np.array(cap, dtype=float)          # flows on no link move at their caps
    pair_flow, pair_link = sorted_pairs(cap, links)
    on_links = np.unique(pair_flow)
    rate[on_links] = fair_rates(cap, pair_flow, pair_link, capacity)[on_links]
    return rate


def sorted_pairs(cap: np.ndarray, links: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (flow, link) pairs of `links` (padded with -1), sorted by link, then by the flow's cap, then by flow:
    the order fair_rates walks. A subset taken with a mask keeps it."""
    rows, cols = np.nonzero(links >= 0)
    on = links[rows, cols]
    order = np.lexsort((rows, cap[rows], on))
    return rows[order], on[order]


def fair_rates(cap, pair_flow, pair_link, capacity) -> np.ndarray:
    """Max-min fair rates of the flows named in `pair_flow`, indexed like `cap` (0 for the others), through the
    links paired with them (pairs as sorted_pairs gives them, each flow's links all listed)."""
    n, n_links = len(cap), len(capacity)
    rate = np.zeros(n)
    free = np.zeros(n, dtype=bool)
    free[pair_flow] = True
    fixed_load = np.zeros(n_links)
    while len(pair_flow):
        level = _fill_levels(cap, pair_flow, pair_link, fixed_load, capacity)
        flow_level = np.full(n, np.inf)
        np.minimum.at(flow_level, pair_flow, level[pair_link])
        lowest = _local_minima(level, flow_level, pair_flow, pair_link)
        fixing = cap <= flow_level                          # below all its links' levels: it ends at its cap
        fixing[pair_flow[lowest[pair_link]]] = True         # on a link that fills now
        fixing &= free
        rate[fixing] = np.minimum(cap[fixing], flow_level[fixing])
        free &= ~fixing
        fixed_pairs = fixing[pair_flow]
        fixed_load += np.bincount(pair_link[fixed_pairs], weights=rate[pair_flow[fixed_pairs]], minlength=n_links)
        pair_flow, pair_link = pair_flow[~fixed_pairs], pair_link[~fixed_pairs]
    return rate


def _fill_levels(cap, pair_flow, pair_link, fixed_load, capacity) -> np.ndarray:
    """Per link, the common level x of its free flows at which it fills (inf where it cannot fill)."""
    n_links = len(capacity)
    pair_cap = cap[pair_flow]
    count = np.bincount(pair_link, minlength=n_links)
    first = np.cumsum(count) - count                  # each link's first pair
    rank = np.arange(len(pair_link)) - first[pair_link]
    below = np.cumsum(pair_cap) - pair_cap            # caps summed before each pair...
    below -= below[first[pair_link]]                  # ...within its link
    # the link's load were the level at this pair's cap: smaller caps in full, this one and larger ones at it
    load = fixed_load[pair_link] + below + (count[pair_link] - rank) * pair_cap
    capped = load < capacity[pair_link]               # flows that reach their caps before the link fills
    n_capped = np.bincount(pair_link[capped], minlength=n_links)
    capped_sum = np.bincount(pair_link[capped], weights=pair_cap[capped], minlength=n_links)
    rising = count - n_capped
    level = np.full(n_links, np.inf)
    fills = rising > 0
    level[fills] = np.maximum(capacity[fills] - fixed_load[fills] - capped_sum[fills], 0.0) / rising[fills]
    return level


def _local_minima(level, flow_level, pair_flow, pair_link) -> np.ndarray:
    """Links that fill at a finite level no lower than any level on the links of their free flows."""
    lowest_around = np.full(len(level), np.inf)
    np.minimum.at(lowest_around, pair_link, flow_level[pair_flow])
    return np.isfinite(level) & (level <= lowest_around)
