"""Every device's availability in a run: the on-intervals its group's model samples (availability.py), drawn from
a seed up to a horizon that grows when a query reaches it, and the queries the engine asks of them (who is online
at t, until when, when next; for the whole fleet or a few devices).

Online means start <= t < end. A query that the sample cannot settle re-samples at a doubled horizon, which by the
models' prefix property changes no answer.
"""
import math
from typing import Sequence

import numpy as np

from .availability import HOUR_S, AvailabilityModel
from .intervals import joined
from .sampled import GroupSampled
from .seeding import child_seed

FEW = 16          # devices a query answers one by one (in Python) rather than with numpy's array calls
CURSOR_STEPS = 4  # rows a device may step over from the last query's answer before a binary search is cheaper


def _check_time(t: float) -> None:
    if not math.isfinite(t):
        raise ValueError(f"query time must be finite, got {t!r}")


class Availability(GroupSampled):
    """Every device's on-intervals, pre-sampled from a seed, and queries on them.

    Devices are numbered group after group. Intervals are stored flat (device d owns rows
    offsets[d]:offsets[d+1]) and sampled up to a horizon. A query that the sample cannot settle re-samples at
    a doubled horizon, which by the prefix property changes no answer. Online means start <= t < end. The first
    sample covers an hour: a run's first rounds need no more, and a 1,000,000-device Markov fleet samples a day in
    ~30 s and 3 GB but an hour in a third of that (benchmarks/fleet_build.py); a run that goes further doubles it.
    """

    def __init__(
        self,
        groups: Sequence[tuple[AvailabilityModel, int]],
        seed: np.random.SeedSequence,
        initial_horizon_s: float = HOUR_S,
    ):
        super().__init__(groups, seed, initial_horizon_s)

    def online_at(self, t: float) -> np.ndarray:
        """(n,) bool: which devices are online at t."""
        self._cover(t)
        index = self._first_ending_after(t)
        has_one = index < self._offsets[1:]
        online = np.zeros(self.n, dtype=bool)
        online[has_one] = self._starts[index[has_one]] <= t
        return online

    def online_each(self, devices: np.ndarray, t: float) -> np.ndarray:
        """online_at(t)[devices], without a query of the whole fleet (an asynchronous dispatch asks a few)."""
        self._cover(t)  # t < horizon from here: a start at or before t is final
        devices = np.asarray(devices, dtype=np.int64)
        index = self._first_ending_after_each(devices, t)
        has_one = index < self._offsets[devices + 1]
        return has_one & (self._starts[np.where(has_one, index, 0)] <= t) if len(self._starts) else has_one

    def online_one(self, device: int, t: float) -> bool:
        """online_each for one device, in plain Python (a draw by rejection asks one device at a time)."""
        self._cover(t)
        index = self._first_ending_after_one(device, t)
        return index < self._offsets[device + 1] and bool(self._starts[index] <= t)

    def count_online(self, t: float) -> int:
        """online_at(t).sum() in O(log rows): a device's rows are disjoint, so the rows that started by t less
        those that ended by t are the devices online at t (an end past the horizon may still grow, but lies past
        t either way)."""
        self._cover(t)
        if self._sorted_bounds is None:
            self._sorted_bounds = (np.sort(self._starts), np.sort(self._ends))
        starts, ends = self._sorted_bounds
        return int(np.searchsorted(starts, t, side="right") - np.searchsorted(ends, t, side="right"))

    def online_until(self, device: int, t: float) -> float:
        """The end of the on-interval containing t; t itself when the device is offline at t."""
        _check_time(t)
        while True:
            row = self._row_ending_after(device, t)
            if row is not None and self._is_final(row[0]) and row[0] <= t:  # online at t
                if self._is_final(row[1]):
                    return row[1]
            elif t < self._horizon_s or (row is not None and self._is_final(row[0])):  # offline at t
                return float(t)
            self._sample(2 * self._horizon_s)

    def online_until_each(self, devices: np.ndarray, t: float, needed_until: np.ndarray | None = None) -> np.ndarray:
        """online_until(d, t) for each of these devices at once (a round's selected devices). With `needed_until`
        (per device, the instant up to which the caller compares: its task's end), a device online past the
        sampled horizon while its need ends before it gets the horizon, a lower bound that decides the same
        comparisons, instead of a re-sample of the whole fleet at a doubled horizon."""
        devices = np.asarray(devices, dtype=np.int64)
        if len(devices) <= FEW:   # numpy's calls cost more than a loop over a handful of devices
            return np.array(self._until_few(devices.tolist(), t, None if needed_until is None else
                                            np.asarray(needed_until, dtype=float).tolist()), dtype=float)
        if not (0 <= devices.min() and devices.max() < self.n):
            raise IndexError(f"devices out of range for {self.n} devices")
        self._cover(t)  # t < horizon from here: an offline answer is final
        while True:
            index = self._first_ending_after_each(devices, t)
            has_one = index < self._offsets[1:][devices]
            row = np.where(has_one, index, 0)
            starts = np.where(has_one, self._starts[row] if len(self._starts) else 0.0, math.inf)
            ends = np.where(has_one, self._ends[row] if len(self._ends) else 0.0, math.inf)
            online = starts <= t
            unsettled = online & (ends >= self._horizon_s) & (ends != math.inf)
            enough = np.zeros(len(devices), dtype=bool) if needed_until is None else needed_until < self._horizon_s
            if not (unsettled & ~enough).any():
                return np.where(unsettled, self._horizon_s, np.where(online, ends, float(t)))
            self._sample(2 * self._horizon_s)

    def online_until_list(self, devices: list[int], t: float,
                          needed_until: list[float] | None = None) -> list[float]:
        """online_until_each with Python lists in and out (an asynchronous dispatch's one or two new tasks, or the
        ~100 in flight): the same answers, without numpy's calls for a few devices."""
        if len(devices) <= FEW:
            return self._until_few(devices, t, needed_until)
        return self.online_until_each(np.array(devices, dtype=np.int64), t,
                                      None if needed_until is None else np.array(needed_until)).tolist()

    def _until_few(self, devices: list[int], t: float, needed_until: list[float] | None) -> list[float]:
        """online_until_each for a few devices, device by device, as Python lists."""
        if devices and (min(devices) < 0 or max(devices) >= self.n):
            raise IndexError(f"devices out of range for {self.n} devices")
        self._cover(t)  # t < horizon from here: an offline answer is final
        while True:
            each = [self._until_one(d, t, None if needed_until is None else needed_until[i])
                    for i, d in enumerate(devices)]
            if None not in each:
                return each
            self._sample(2 * self._horizon_s)

    def may_change(self, answers: np.ndarray, needed_until: np.ndarray) -> np.ndarray:
        """Which answers online_until_each gave at the present horizon could differ, asked again with these
        (larger) needs: only the horizon given as a lower bound where the need now reaches it. An answer below the
        horizon is final, and a re-sample changes no final answer."""
        return (answers == self._horizon_s) & (needed_until >= self._horizon_s)

    def may_change_list(self, answers: list[float], needed_until: list[float]) -> list[bool]:
        """may_change on Python lists (a dispatch's few new tasks, or the ~100 in flight): the same answers."""
        horizon = self._horizon_s
        return [answer == horizon and needed >= horizon for answer, needed in zip(answers, needed_until)]

    def _until_one(self, device: int, t: float, needed_until: float | None) -> float | None:
        """online_until_each for one device, None where the sample cannot settle it (online past the horizon,
        and needed to or past it)."""
        index = self._first_ending_after_one(device, t)
        if index == self._offsets[device + 1] or self._starts[index] > t:   # offline at t
            return float(t)
        end = float(self._ends[index])
        if end < self._horizon_s or end == math.inf:
            return end
        return self._horizon_s if needed_until is not None and needed_until < self._horizon_s else None

    def next_online(self, device: int, t: float) -> float:
        """The earliest t' >= t at which the device is online; math.inf if never."""
        _check_time(t)
        while True:
            row = self._row_ending_after(device, t)
            if row is not None and self._is_final(row[0]):
                return max(row[0], float(t))
            self._sample(2 * self._horizon_s)

    def next_online_all(self, t: float) -> np.ndarray:
        """(n,) next_online(d, t) of every device at once: t where online, math.inf where never again."""
        self._cover(t)
        while True:
            index = self._first_ending_after(t)
            has_one = index < self._offsets[1:]
            starts = np.full(self.n, math.inf)
            starts[has_one] = np.maximum(self._starts[index[has_one]], t)
            final = has_one & ((starts < self._horizon_s) | (starts == math.inf))
            if final.all():
                return starts
            self._sample(2 * self._horizon_s)

    def intervals(self, device: int) -> np.ndarray:
        """(k, 2) on-intervals that start before the current horizon (for plotting)."""
        starts, ends = self._device_rows(device)
        before = starts < self._horizon_s
        return np.column_stack([starts[before], ends[before]])

    def _sample(self, horizon_s: float) -> None:
        parts = []
        for group_index, (model, count) in enumerate(self._groups):
            seed = child_seed(self._seed, group_index)
            if hasattr(model, "sample_flat"):   # a model that samples all its devices at once
                parts.append(model.sample_flat(seed, count, horizon_s))
            else:
                per_device = model.sample(seed, count, horizon_s)
                rows = np.concatenate(per_device) if per_device else np.empty((0, 2))
                parts.append((rows[:, 0], rows[:, 1], np.array([len(r) for r in per_device], dtype=np.int64)))
        if not parts:
            parts = [(np.empty(0), np.empty(0), np.zeros(0, dtype=np.int64))]
        starts, ends, counts = (joined(column) for column in zip(*parts))
        self._offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        self._starts, self._ends = np.ascontiguousarray(starts), np.ascontiguousarray(ends)
        self._horizon_s = horizon_s
        self._cursor: tuple[float, np.ndarray] | None = None   # (t, _first_ending_after(t)) of the last query
        self._sorted_bounds: tuple[np.ndarray, np.ndarray] | None = None   # every row's start, every end: sorted
        # per device, _first_ending_after(t) at the t of its last query through _first_ending_after_each
        self._memo_index, self._memo_t = self._offsets[:-1].copy(), np.full(self.n, -math.inf)

    def _cover(self, t: float) -> None:
        _check_time(t)
        self._extend_past(t)

    def _is_final(self, time_s: float) -> bool:
        """Whether a sampled start or end is final: it lies before the horizon, or it is infinite (the
        always-on row and the never-again row are the last a device will ever have)."""
        return time_s < self._horizon_s or time_s == math.inf

    def _row_ending_after(self, device: int, t: float) -> tuple[float, float] | None:
        starts, ends = self._device_rows(device)
        i = np.searchsorted(ends, t, side="right")
        return (float(starts[i]), float(ends[i])) if i < len(ends) else None

    def _device_rows(self, device: int) -> tuple[np.ndarray, np.ndarray]:
        if not 0 <= device < self.n:
            raise IndexError(f"device {device} out of range for {self.n} devices")
        rows = slice(self._offsets[device], self._offsets[device + 1])
        return self._starts[rows], self._ends[rows]

    def _first_ending_after(self, t: float) -> np.ndarray:
        """Per device, the index of its first row with end > t (its segment's end if none).

        A run asks at times that rarely go back: from the answer to the last query at or before t, each device
        steps over the rows that ended since (O(n) per query, a step or two); otherwise, or after more than
        CURSOR_STEPS steps, one binary search on all devices at once (O(n log k), not O(all rows)).
        """
        last = self._offsets[1:]
        if self._cursor is not None and t == self._cursor[0]:  # a second query of the instant (a round's start)
            return self._cursor[1].copy()
        if self._cursor is not None and t >= self._cursor[0]:
            index = self._cursor[1].copy()
            for _ in range(CURSOR_STEPS):
                behind = np.flatnonzero(index < last)
                behind = behind[self._ends[index[behind]] <= t]
                if not len(behind):
                    self._cursor = (t, index)
                    return index.copy()
                index[behind] += 1
        low = self._search(self._offsets[:-1].copy(), last.copy(), t)
        self._cursor = (t, low)
        return low.copy()

    def _first_ending_after_each(self, devices: np.ndarray, t: float) -> np.ndarray:
        """_first_ending_after(t)[devices], looking only at these devices' rows (an asynchronous dispatch asks
        about a few at a time): from the fleet-wide answer at t where there is one, else from each device's own
        answer to its last such query (its segment's start where that was later than t), a step or two forward,
        then a binary search over the rest of its rows."""
        if self._cursor is not None and t == self._cursor[0]:
            return self._cursor[1][devices]
        last = self._offsets[devices + 1]
        index = self._memo_index[devices]
        later = self._memo_t[devices] > t
        if later.any():
            index[later] = self._offsets[devices[later]]
        for _ in range(CURSOR_STEPS):
            behind = np.flatnonzero(index < last)
            behind = behind[self._ends[index[behind]] <= t]
            if not len(behind):
                break
            index[behind] += 1
        else:
            index = self._search(index, last, t)
        self._memo_index[devices], self._memo_t[devices] = index, t
        return index

    def _first_ending_after_one(self, device: int, t: float) -> int:
        """_first_ending_after_each for one device, in plain Python (numpy's calls cost more than a few steps):
        the same steps from the same answers kept, then a binary search over the rest of its rows."""
        if self._cursor is not None and t == self._cursor[0]:
            return int(self._cursor[1][device])
        last, ends = int(self._offsets[device + 1]), self._ends
        index = int(self._offsets[device] if self._memo_t[device] > t else self._memo_index[device])
        for _ in range(CURSOR_STEPS):
            if index == last or ends[index] > t:
                break
            index += 1
        else:
            index += int(np.searchsorted(ends[index:last], t, side="right"))
        self._memo_index[device], self._memo_t[device] = index, t
        return index

    def _search(self, low: np.ndarray, high: np.ndarray, t: float) -> np.ndarray:
        """Per segment of rows [low, high), the index of its first row with end > t (high if none): one binary
        search on all segments at once."""
        while (searching := low < high).any():
            middle = (low + high) // 2
            ended = np.zeros(len(low), dtype=bool)
            ended[searching] = self._ends[middle[searching]] <= t
            low = np.where(searching & ended, middle + 1, low)
            high = np.where(searching & ~ended, middle, high)
        return low
