"""On-intervals: (k, 2) float64 arrays of [start_s, end_s) rows, sorted, disjoint and not touching.

A device that will never come online again ends its array with the row [inf, inf) ("online from infinity on").
It makes "never" a plain interval, so the queries need no special case and know that nothing lies beyond.
"""
from typing import Sequence

import numpy as np

NEVER_AGAIN = np.array([[np.inf, np.inf]])
NEVER_AGAIN.setflags(write=False)


def merge_intervals(intervals: np.ndarray) -> np.ndarray:
    """Sorted union of [start, end) rows: overlapping or touching rows join, empty rows go."""
    rows = np.asarray(intervals, dtype=np.float64).reshape(-1, 2)
    rows = rows[rows[:, 1] > rows[:, 0]]
    rows = rows[np.argsort(rows[:, 0], kind="stable")]
    if len(rows) == 0:
        return rows
    reach = np.maximum.accumulate(rows[:, 1])
    # A row opens a new interval when it starts after everything before it has ended.
    opens = np.concatenate([[True], rows[1:, 0] > reach[:-1]])
    closes = np.concatenate([opens[1:], [True]])
    return np.column_stack([rows[opens, 0], reach[closes]])


def read_only(array: np.ndarray) -> np.ndarray:
    """The array, frozen: sampled intervals are shared between devices and must not change under them."""
    array.setflags(write=False)
    return array


def merge_sorted_segments(starts: np.ndarray, ends: np.ndarray,
                          counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """merge_intervals of many devices at once, for rows already sorted with nondecreasing ends (a Markov chain's
    alternating bounds): device d owns the next counts[d] rows. Empty rows go, touching rows join. Returns the
    merged rows of all devices, in order, as their starts and their ends, and each device's count of them."""
    owner = np.repeat(np.arange(len(counts)), counts)
    keep = ends > starts
    starts, ends, owner = starts[keep], ends[keep], owner[keep]
    if not len(starts):
        return np.empty(0), np.empty(0), np.zeros(len(counts), dtype=np.int64)
    new_device = np.concatenate([[True], owner[1:] != owner[:-1]])
    opens = new_device | np.concatenate([[True], starts[1:] > ends[:-1]])
    closes = np.concatenate([opens[1:], [True]])
    return starts[opens], ends[closes], np.bincount(owner[opens], minlength=len(counts)).astype(np.int64)


def joined(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """np.concatenate without copying a single array (a large fleet's intervals are hundreds of MB)."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
