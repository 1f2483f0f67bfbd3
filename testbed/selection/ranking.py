"""Stable orderings of a selection's candidates, exactly as `np.argsort(keys, kind="stable")` gives them, faster.

Selectors rank tens of thousands of candidates a round and then draw from the ranking, so the ranking's order,
ties included, decides who trains: it must stay the stable one (equal keys in index order, NaN last). numpy's
stable sort is a merge sort, about 4x slower on floats than its default sort, which on this hardware is a
vectorised quicksort that leaves ties in any order. So: sort with the fast one, then put each run of equal keys
back in index order (one sort of integers where ties exist at all); and where only the first `top` are needed,
partition first and sort those alone.
"""
from __future__ import annotations

import numpy as np


def stable_order(keys: np.ndarray, top: int | None = None) -> np.ndarray:
    """np.argsort(keys, kind="stable")[:top], the same indices."""
    keys = np.asarray(keys)
    n = len(keys)
    if top is not None and top <= 0:
        return np.zeros(0, dtype=np.int64)
    if top is None or top >= n:
        return _stable(keys)
    kth = np.partition(keys, top - 1)[top - 1]
    if kth != kth:  # NaN: fewer than `top` numbers, and the NaNs that follow them go in index order
        return _stable(keys)[:top]
    below = np.flatnonzero(keys < kth)
    tied = np.flatnonzero(keys == kth)[:top - len(below)]   # the first of the equal keys, by index
    chosen = np.sort(np.concatenate([below, tied]))
    return chosen[_stable(keys[chosen])]


def _stable(keys: np.ndarray) -> np.ndarray:
    order = np.argsort(keys)
    ordered = keys[order]
    same = ordered[1:] == ordered[:-1]
    if ordered.dtype.kind in "fc":
        nan = ordered != ordered
        same |= nan[1:] & nan[:-1]
    if not same.any():
        return order
    run = np.concatenate([[0], np.cumsum(~same)])   # which run of equal keys each sorted place is in
    return np.sort(run * len(keys) + order) % len(keys)
