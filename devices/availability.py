"""When devices are online: models that sample on-intervals from a seed (fleet_availability.py asks them).

Every model's `sample(seed, n_devices, horizon_s)` returns, per device, its on-intervals (see intervals.py).
They are exact on [0, horizon_s): a row that starts before the horizon is real (online over all of it), and
a row's end is final only if it lies before the horizon (a later stretch may join it) or is infinite.
Each device draws from its own generator in fixed-size blocks, so a longer horizon only appends: the same seed
gives the same intervals on the common prefix. That lets `Availability` (fleet_availability.py) extend its horizon
lazily without changing any answer.
"""
import math
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from .intervals import NEVER_AGAIN, joined, merge_intervals, merge_sorted_segments, read_only
from .seeding import device_generators, device_rng

DAY_S = 86400.0
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
        return tuple(joined(column) for column in zip(*parts))

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
