"""When devices are online: models that sample on-intervals from a seed, and the queries the engine asks.

Every model's `sample(seed, n_devices, horizon_s)` returns, per device, its on-intervals (see intervals.py).
They are exact on [0, horizon_s): a row that starts before the horizon is real (online over all of it), and
a row's end is final only if it lies before the horizon (a later stretch may join it) or is infinite.
Each device draws from its own generator in fixed-size blocks, so a longer horizon only appends: the same seed
gives the same intervals on the common prefix. That lets `Availability` extend its horizon lazily without
changing any answer.
"""
import math
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from .intervals import NEVER_AGAIN, merge_intervals, merge_sorted_segments, read_only
from .sampled import GroupSampled
from .seeding import child_seed, device_generators, device_rng

DAY_S = 86400.0
FEW = 16          # devices a query answers one by one (in Python) rather than with numpy's array calls
CURSOR_STEPS = 4  # rows a device may step over from the last query's answer before a binary search is cheaper
HOUR_S = 3600.0
# Draws are made in blocks so that the random stream does not depend on the horizon; 64 keeps the number of
# numpy calls small without drawing much past a short horizon.
CYCLES_PER_BLOCK = 64
# blocks drawn per device: 1.25 x the expected number; a device needing more is 5 sd out at a day of 600-s cycles
BLOCK_MARGIN = 1.25
BATCH = 4096  # devices whose draws MarkovOnOff holds at once: about 4096 x 4 blocks x 128 x 8 B = 17 MB
DAYS_PER_BLOCK = 64
# With |time-zone offset| <= 12 h and a window shorter than a day, no window of day -3 reaches t = 0.
FIRST_DIURNAL_DAY = -2


class AvailabilityModel(Protocol):
    def sample(self, seed: np.random.SeedSequence, n_devices: int, horizon_s: float) -> list[np.ndarray]: ...


@dataclass(frozen=True)
class AlwaysOn:
    """Online from 0 on, for good: the default, and the baseline without availability effects."""

    def sample(self, seed, n_devices, horizon_s):
        always = read_only(np.array([[0.0, math.inf]]))
        return [always] * n_devices


@dataclass(frozen=True)
class MarkovOnOff:
    """Alternating exponential on and off durations (a two-state continuous-time Markov chain).

    "stationary" starts on with probability mean_on / (mean_on + mean_off); the exponential's lack of memory
    makes the first duration already stationary, so there is no burn-in. Rows that would start at or past the
    horizon are left out (none of them is final; a longer horizon draws them): drawn in blocks of 64 cycles, an
    hour's sample would otherwise hold mostly rows past it.
    """

    mean_on_s: float
    mean_off_s: float
    start: str = "stationary"

    def __post_init__(self):
        for field in ("mean_on_s", "mean_off_s"):
            value = getattr(self, field)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{field} must be a finite number > 0, got {value!r}")
        if self.start not in ("stationary", "on", "off"):
            raise ValueError(f"start must be one of stationary, on, off; got {self.start!r}")

    def sample(self, seed, n_devices, horizon_s):
        starts, ends, counts = self.sample_flat(seed, n_devices, horizon_s)
        return np.split(np.column_stack([starts, ends]), np.cumsum(counts)[:-1])

    def sample_flat(self, seed, n_devices, horizon_s) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """_device_intervals of every device, as the starts and the ends of all rows and each device's row count,
        batched: each device still draws from its own generator, the same values in the same order (its blocks
        in one call), and the sums and rows are computed for BATCH devices at once with the same float
        operations, so the rows are the per-device ones bit for bit (tests/devices/test_availability_models.py).
        A device whose drawn blocks end before the horizon (rare: BLOCK_MARGIN) takes the per-device path."""
        cycle_s = self.mean_on_s + self.mean_off_s
        blocks = max(1, math.ceil(BLOCK_MARGIN * horizon_s / (CYCLES_PER_BLOCK * cycle_s)))
        parts = [self._batch(seed, range(first, min(first + BATCH, n_devices)), horizon_s, blocks)
                 for first in range(0, n_devices, BATCH)]
        if not parts:
            return np.empty(0), np.empty(0), np.zeros(0, dtype=np.int64)
        return tuple(_joined(column) for column in zip(*parts))

    def _batch(self, seed, devices: range, horizon_s: float, blocks: int) -> tuple[np.ndarray, np.ndarray]:
        fraction_on = self.mean_on_s / (self.mean_on_s + self.mean_off_s)
        n, width = len(devices), 2 * CYCLES_PER_BLOCK
        starts_on = np.empty(n, dtype=bool)
        draws = np.empty((n, blocks * CYCLES_PER_BLOCK, 2))
        for row, rng in enumerate(device_generators(seed, devices)):
            stationary = rng.random() < fraction_on   # drawn whatever the start, as _device_intervals does
            starts_on[row] = stationary if self.start == "stationary" else self.start == "on"
            rng.standard_exponential(out=draws[row])   # the same draws as a (blocks * 64, 2) call, not copied
        means = np.where(starts_on[:, None], [self.mean_on_s, self.mean_off_s], [self.mean_off_s, self.mean_on_s])
        durations = (draws.reshape(n, blocks, CYCLES_PER_BLOCK, 2) * means[:, None, None, :]).reshape(n, blocks, width)
        # bounds[:, 0] = 0, then each block's cumulative sum added to the previous block's last bound
        bounds = np.zeros((n, 1 + blocks * width))
        within = np.cumsum(durations, axis=2)
        last = np.zeros(n)
        for b in range(blocks):
            bounds[:, 1 + b * width: 1 + (b + 1) * width] = last[:, None] + within[:, b]
            last = bounds[:, (b + 1) * width]
        reached = bounds[:, width::width] >= horizon_s          # (n, blocks): the while loop's test, block by block
        used = np.where(reached.any(axis=1), reached.argmax(axis=1) + 1, 0)   # blocks the loop draws; 0: too few
        # rows (bounds[2k + f], bounds[2k + 1 + f]) with f = 0 when starting on, k < used * CYCLES_PER_BLOCK
        # and only those that start before the horizon (the rest would be dropped as not final anyway)
        k = np.arange(blocks * CYCLES_PER_BLOCK)
        first_index = 2 * k[None, :] + (~starts_on)[:, None]
        on_starts = np.take_along_axis(bounds, first_index, axis=1)
        valid = (k[None, :] < (used * CYCLES_PER_BLOCK)[:, None]) & (on_starts < horizon_s)
        starts, ends, counts = merge_sorted_segments(on_starts[valid],
                                                     np.take_along_axis(bounds, first_index + 1, axis=1)[valid],
                                                     valid.sum(axis=1))
        if used.all():
            return starts, ends, counts
        per_device = np.split(np.column_stack([starts, ends]), np.cumsum(counts)[:-1])
        for row in np.flatnonzero(used == 0):
            per_device[row] = self._device_intervals(device_rng(seed, devices[row]), horizon_s)
        rows = np.concatenate(per_device)
        return rows[:, 0].copy(), rows[:, 1].copy(), np.array([len(r) for r in per_device], dtype=np.int64)

    def _device_intervals(self, rng, horizon_s):
        fraction_on = self.mean_on_s / (self.mean_on_s + self.mean_off_s)
        starts_on = {"on": True, "off": False, "stationary": rng.random() < fraction_on}[self.start]
        means = (self.mean_on_s, self.mean_off_s) if starts_on else (self.mean_off_s, self.mean_on_s)
        # Instants of the state changes, from t = 0; states alternate from the initial one.
        changes = [np.zeros(1)]
        while changes[-1][-1] < horizon_s:
            durations = rng.standard_exponential((CYCLES_PER_BLOCK, 2)) * means
            changes.append(changes[-1][-1] + np.cumsum(durations.ravel()))
        bounds = np.concatenate(changes)
        first_on = 0 if starts_on else 1
        rows = np.column_stack([bounds[first_on:-1:2], bounds[first_on + 1 :: 2]])
        return merge_intervals(rows[rows[:, 0] < horizon_s])


@dataclass(frozen=True)
class Diurnal:
    """Online every day in a local window [on_hour, off_hour), which wraps past midnight when off < on.

    Phones train overnight while charging (FLASH and FedScale traces show it). Each window end moves each day
    by N(0, jitter_s), clipped to half the shorter of window and gap so windows stay ordered and disjoint.
    Each device lives in a time zone offset uniform in [-spread/2, +spread/2] hours: local = global + offset.
    """

    on_hour: float = 22
    off_hour: float = 6
    jitter_s: float = 1800
    timezone_spread_h: float = 0

    def __post_init__(self):
        for field in ("on_hour", "off_hour"):
            value = getattr(self, field)
            if not 0 <= value < 24:
                raise ValueError(f"{field} must be in [0, 24), got {value!r}")
        if self.on_hour == self.off_hour:
            raise ValueError("on_hour and off_hour must differ (use AlwaysOn for a device always online)")
        if not (math.isfinite(self.jitter_s) and self.jitter_s >= 0):
            raise ValueError(f"jitter_s must be a finite number >= 0, got {self.jitter_s!r}")
        if not 0 <= self.timezone_spread_h <= 24:
            raise ValueError(f"timezone_spread_h must be in [0, 24], got {self.timezone_spread_h!r}")

    def sample(self, seed, n_devices, horizon_s):
        return [self._device_intervals(rng, horizon_s) for rng in device_generators(seed, range(n_devices))]

    def _device_intervals(self, rng, horizon_s):
        half_spread_s = self.timezone_spread_h * HOUR_S / 2
        offset_s = rng.uniform(-half_spread_s, half_spread_s)
        window_s = (self.off_hour - self.on_hour) % 24 * HOUR_S
        max_shift_s = min(window_s, DAY_S - window_s) / 2
        windows = []
        day = FIRST_DIURNAL_DAY
        while day * DAY_S + self.on_hour * HOUR_S - max_shift_s - offset_s < horizon_s:
            days = np.arange(day, day + DAYS_PER_BLOCK)
            shifts = np.clip(rng.normal(0.0, self.jitter_s, (DAYS_PER_BLOCK, 2)), -max_shift_s, max_shift_s)
            opens = days * DAY_S + self.on_hour * HOUR_S - offset_s
            windows.append(np.column_stack([opens + shifts[:, 0], opens + window_s + shifts[:, 1]]))
            day += DAYS_PER_BLOCK
        return merge_intervals(np.clip(np.concatenate(windows), 0.0, None))


@dataclass(frozen=True, eq=False)
class TraceIntervals:
    """Replays recorded on-intervals. Device i gets trace i % len(traces) ("cycle") or a seeded random one.

    A trace with a period repeats with it, as FedScale replays `t % finish_time`; intervals past the period are
    clipped because that replay never reaches them. A trace without a period ends offline for good.
    """

    traces: tuple[np.ndarray, ...]
    period_s: tuple[float | None, ...]
    assignment: str = "cycle"

    def __post_init__(self):
        if len(self.traces) == 0 or len(self.traces) != len(self.period_s):
            raise ValueError(
                f"need one period_s per trace and at least one trace; got {len(self.traces)} traces "
                f"and {len(self.period_s)} periods"
            )
        if self.assignment not in ("cycle", "random"):
            raise ValueError(f"assignment must be cycle or random, got {self.assignment!r}")
        for index, period in enumerate(self.period_s):
            if period is not None and not (math.isfinite(period) and period > 0):
                raise ValueError(f"period_s[{index}] must be None or a finite number > 0, got {period!r}")
        traces = tuple(
            read_only(_checked_trace(index, trace, period))
            for index, (trace, period) in enumerate(zip(self.traces, self.period_s))
        )
        object.__setattr__(self, "traces", traces)
        object.__setattr__(self, "period_s", tuple(None if p is None else float(p) for p in self.period_s))

    def sample(self, seed, n_devices, horizon_s):
        replays = [
            read_only(_replay(trace, period, horizon_s)) for trace, period in zip(self.traces, self.period_s)
        ]
        return [replays[index] for index in self._trace_of_devices(seed, n_devices)]

    def _trace_of_devices(self, seed, n_devices):
        if self.assignment == "cycle":
            return np.arange(n_devices) % len(self.traces)
        return [rng.integers(len(self.traces)) for rng in device_generators(seed, range(n_devices))]


def _checked_trace(index: int, trace, period: float | None) -> np.ndarray:
    rows = np.asarray(trace, dtype=np.float64)
    if rows.size == 0:
        return np.empty((0, 2))
    if rows.ndim != 2 or rows.shape[1] != 2:
        raise ValueError(f"trace {index} must be a (k, 2) array of [start_s, end_s) rows, got shape {rows.shape}")
    if not np.isfinite(rows).all() or (rows[:, 0] < 0).any() or (rows[:, 1] < rows[:, 0]).any():
        raise ValueError(f"trace {index} needs finite rows with 0 <= start_s <= end_s")
    if period is not None:
        rows = np.clip(rows, 0.0, period)
    return merge_intervals(rows)


def _replay(trace: np.ndarray, period: float | None, horizon_s: float) -> np.ndarray:
    if period is None or len(trace) == 0:
        return np.concatenate([trace, NEVER_AGAIN])
    n_periods = math.floor(horizon_s / period) + 1  # enough repeats to pass the horizon
    shifts = np.arange(n_periods)[:, None, None] * period
    return merge_intervals(trace[None] + shifts)


def _joined(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """np.concatenate without copying a single array (a large fleet's intervals are hundreds of MB)."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


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
        if len(devices) and not (0 <= devices.min() and devices.max() < self.n):
            raise IndexError(f"devices out of range for {self.n} devices")
        self._cover(t)  # t < horizon from here: an offline answer is final
        while True:
            if len(devices) <= FEW:   # numpy's calls cost more than a loop over a handful of devices
                each = [self._until_one(d, t, None if needed_until is None else float(needed_until[i]))
                        for i, d in enumerate(devices.tolist())]
                if None not in each:
                    return np.array(each, dtype=float)
                self._sample(2 * self._horizon_s)
                continue
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
        starts, ends, counts = (_joined(column) for column in zip(*parts))
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
