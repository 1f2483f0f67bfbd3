"""Fluctuating speed and bandwidth: processes that scale a device's FLOP/s or link rate over simulated time.

Semantics:
- Device d has a piecewise-constant factor f_d(t) > 0 from t = 0 on, right-continuous: f_i on [t_i, t_{i+1}).
- The factor multiplies the device's base rate R (FLOP/s for compute, bytes/s for a link): its rate is R f_d(t).
- A phase that must get through `amount` (FLOPs or bytes) from t0 ends at the t1 with
  integral_{t0}^{t1} R f_d(t) dt = amount, summed piece by piece (R f_i (t_{i+1} - t_i) done per whole piece,
  the rest at the last piece's rate), never at the rate of the phase's start.
- Where f_d = 1 over the whole phase it takes exactly amount / R, as the simulator computes without rates.

Models are frozen dataclasses, checked when built. `sample(seed, n_devices, horizon_s)` returns per device a
step function (times, factors): times[0] = 0, strictly increasing, exact on [0, horizon_s): a step before the
horizon is real, and the last piece before the horizon holds up to it. A step at math.inf means "no change ever
again": the piece before it holds forever (Constant, a trace without a period). Like availability.py's models,
each device draws from its own stream in fixed blocks, so a longer horizon only appends steps and `Rates` can
extend its horizon lazily without changing any answer. MarkovSlowdown and DiurnalRate draw their slow periods
with availability.py's MarkovOnOff and Diurnal (their on-intervals are the slow periods).

Trace files (`load_rate_trace`):
- CSV with header `device,t_s,factor` (any column order): device is an integer trace id; the rows of one device
  have strictly increasing t_s from 0 and a finite factor > 0. Rows of devices may interleave. No period: the
  last factor holds forever (`dataclasses.replace(trace, period_s=...)` replays it).
- JSON `{"period_s": optional number, "traces": {"<id>": [[t_s, factor], ...]}}`.
Traces are ordered by id; device i of a group gets trace i % len(traces) (or a seeded random one). Errors are
one-line ValueErrors naming the file, the line (CSV) or trace id (JSON), and what is wrong.
"""
import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from .availability import DAY_S, Diurnal, MarkovOnOff
from .intervals import read_only
from .sampled import GroupSampled
from .seeding import device_generators
from .trace_files import _malformed, _opened

CHUNK = 32  # pieces a phase walks through per numpy call: most phases end within the first few
CSV_COLUMNS = ("device", "t_s", "factor")
JSON_KEYS = ("period_s", "traces")
SLOWDOWN_STARTS = {"stationary": "stationary", "normal": "off", "slow": "on"}  # MarkovOnOff's on = slow


class RateModel(Protocol):
    def sample(
        self, seed: np.random.SeedSequence, n_devices: int, horizon_s: float
    ) -> list[tuple[np.ndarray, np.ndarray]]: ...


def _is_positive(value) -> bool:
    """A finite real number > 0 (not a bool, not a string)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and (
        math.isfinite(value) and value > 0
    )


def _check_positive(model, *fields: str) -> None:
    for field in fields:
        value = getattr(model, field)
        if not _is_positive(value):
            raise ValueError(f"{field} must be a finite number > 0, got {value!r}")


def _slowed_during(slow: np.ndarray, factor: float) -> tuple[np.ndarray, np.ndarray]:
    """Step function that is `factor` on the (k, 2) merged intervals `slow` and 1 elsewhere."""
    times = slow.ravel()
    factors = np.tile([factor, 1.0], len(slow))
    if len(times) == 0 or times[0] > 0:
        times, factors = np.concatenate([[0.0], times]), np.concatenate([[1.0], factors])
    return times, factors


@dataclass(frozen=True)
class Constant:
    """Factor 1 for good: the default, and the baseline without fluctuations (`Rates` answers it directly)."""

    def sample(self, seed, n_devices, horizon_s):
        steps = (read_only(np.array([0.0, math.inf])), read_only(np.array([1.0, 1.0])))
        return [steps] * n_devices


@dataclass(frozen=True)
class MarkovSlowdown:
    """Alternating exponential normal (factor 1) and slow (factor `factor`) periods: thermal throttling or
    background load. start: "stationary" (slow with probability mean_slow / (mean_slow + mean_normal)),
    "normal" or "slow". The slow periods are MarkovOnOff(mean_slow_s, mean_normal_s)'s on-intervals."""

    factor: float
    mean_normal_s: float
    mean_slow_s: float
    start: str = "stationary"

    def __post_init__(self):
        _check_positive(self, "factor", "mean_normal_s", "mean_slow_s")
        if self.start not in SLOWDOWN_STARTS:
            raise ValueError(f"start must be one of {', '.join(SLOWDOWN_STARTS)}; got {self.start!r}")

    def slow_periods(self) -> MarkovOnOff:
        return MarkovOnOff(self.mean_slow_s, self.mean_normal_s, SLOWDOWN_STARTS[self.start])

    def sample(self, seed, n_devices, horizon_s):
        slow = self.slow_periods().sample(seed, n_devices, horizon_s)
        return [_slowed_during(rows, self.factor) for rows in slow]


@dataclass(frozen=True)
class DiurnalRate:
    """Slowed by `factor` every day in a local window [start_hour, end_hour), which wraps past midnight when
    end < start: a link busy in the evening, a phone in use during the day. Jitter and time zones as in
    availability.Diurnal, whose on-windows are the slow windows."""

    factor: float
    start_hour: float
    end_hour: float
    timezone_spread_h: float = 0
    jitter_s: float = 0

    def __post_init__(self):
        _check_positive(self, "factor")
        for field in ("start_hour", "end_hour"):
            value = getattr(self, field)
            if not (isinstance(value, (int, float, np.integer, np.floating)) and 0 <= value < 24):
                raise ValueError(f"{field} must be in [0, 24), got {value!r}")
        if self.start_hour == self.end_hour:
            raise ValueError("start_hour and end_hour must differ (use MarkovSlowdown or TraceRate otherwise)")
        self.slow_windows()  # checks jitter_s and timezone_spread_h, named alike there

    def slow_windows(self) -> Diurnal:
        return Diurnal(
            on_hour=self.start_hour,
            off_hour=self.end_hour,
            jitter_s=self.jitter_s,
            timezone_spread_h=self.timezone_spread_h,
        )

    def sample(self, seed, n_devices, horizon_s):
        slow = self.slow_windows().sample(seed, n_devices, horizon_s)
        return [_slowed_during(rows, self.factor) for rows in slow]


@dataclass(frozen=True, eq=False)
class TraceRate:
    """Recorded step functions, each a (k, 2) array of (t_s, factor) rows: times strictly increasing from 0,
    factors finite and > 0. Device i gets trace i % len(traces) ("cycle") or a seeded random one ("random").
    With period_s, every trace replays at t mod period_s (rows at or past the period are never reached and
    dropped); without, its last factor holds forever."""

    traces: tuple[np.ndarray, ...]
    period_s: float | None = None
    assignment: str = "cycle"

    def __post_init__(self):
        traces = tuple(self.traces)
        if not traces:
            raise ValueError("traces must hold at least one trace")
        if self.assignment not in ("cycle", "random"):
            raise ValueError(f"assignment must be cycle or random, got {self.assignment!r}")
        if self.period_s is not None and not _is_positive(self.period_s):
            raise ValueError(f"period_s must be None or a finite number > 0, got {self.period_s!r}")
        period_s = None if self.period_s is None else float(self.period_s)
        checked = []
        for index, trace in enumerate(traces):
            problem = _trace_problem(trace)
            if problem is not None:
                row, what = problem
                raise ValueError(f"traces[{index}]{'' if row is None else f' row {row}'}: {what}")
            rows = np.array(trace, dtype=np.float64)
            checked.append(read_only(rows if period_s is None else rows[rows[:, 0] < period_s]))
        object.__setattr__(self, "traces", tuple(checked))
        object.__setattr__(self, "period_s", period_s)

    def sample(self, seed, n_devices, horizon_s):
        steps = [self._replay(trace, horizon_s) for trace in self.traces]
        if self.assignment == "cycle":
            return [steps[i % len(steps)] for i in range(n_devices)]
        return [steps[rng.integers(len(steps))] for rng in device_generators(seed, range(n_devices))]

    def _replay(self, trace: np.ndarray, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        times, factors = trace[:, 0], trace[:, 1]
        if self.period_s is None:
            return np.append(times, math.inf), np.append(factors, factors[-1])
        copies = math.floor(horizon_s / self.period_s) + 1  # enough to pass the horizon
        shifts = np.arange(copies)[:, None] * self.period_s
        return (times[None] + shifts).ravel(), np.tile(factors, copies)


def _trace_problem(trace) -> tuple[int | None, str] | None:
    """What is wrong with a trace of (t_s, factor) rows, and in which row (None: the whole trace)."""
    try:
        rows = np.asarray(trace, dtype=np.float64)
    except (TypeError, ValueError):
        return None, "expected a list of [t_s, factor] rows of numbers"
    if rows.ndim != 2 or rows.shape[1] != 2 or len(rows) == 0:
        return None, f"expected a non-empty list of [t_s, factor] rows, got shape {rows.shape}"
    times, factors = rows[:, 0], rows[:, 1]
    if times[0] != 0:
        return 0, f"first time must be 0, got {times[0]:g}"
    bad_time = ~np.isfinite(times)
    bad_time[1:] |= ~(times[1:] > times[:-1])
    bad_factor = ~(np.isfinite(factors) & (factors > 0))
    bad = np.flatnonzero(bad_time | bad_factor)
    if not len(bad):
        return None
    row = int(bad[0])
    if not np.isfinite(times[row]):
        return row, f"times must be finite, got {times[row]:g}"
    if bad_time[row]:
        return row, f"times must increase, got {times[row]:g} after {times[row - 1]:g}"
    return row, f"factor must be > 0 and finite, got {factors[row]:g}"


def _check_time(name: str, t: float) -> None:
    if not (isinstance(t, (int, float, np.integer, np.floating)) and math.isfinite(t) and t >= 0):
        raise ValueError(f"{name} must be a finite time >= 0, got {t!r}")


def _check_phase(amount: float, base_rate: float) -> None:
    if not (isinstance(amount, (int, float, np.integer, np.floating)) and math.isfinite(amount) and amount >= 0):
        raise ValueError(f"amount must be a finite number >= 0, got {amount!r}")
    if not _is_positive(base_rate):
        raise ValueError(f"base_rate must be a finite number > 0, got {base_rate!r}")


class Rates(GroupSampled):
    """Every device's factor step function, sampled from a seed up to a horizon, and the phase queries on it.

    Devices are numbered group after group; group g samples from child_seed(seed, g). Pieces are stored flat
    (device d owns rows offsets[d]:offsets[d+1] of starts, factors, ends). Each device's last piece ends at the
    horizon, or at math.inf when its factor holds forever. A query past it re-samples at a doubled horizon,
    which by the prefix property changes no piece before the old horizon and so no answer.
    """

    def __init__(
        self,
        groups: Sequence[tuple[RateModel, int]],
        seed: np.random.SeedSequence,
        initial_horizon_s: float = DAY_S,
    ):
        super().__init__(groups, seed, initial_horizon_s)
        self._constant = np.repeat(
            [isinstance(model, Constant) for model, _ in self._groups], [count for _, count in self._groups]
        ).astype(bool)

    def is_constant(self, device: int) -> bool:
        """Whether the device's group is Constant (factor 1 for good)."""
        self._check_device(device)
        return bool(self._constant[device])

    def factor_at(self, device: int, t: float) -> float:
        _check_time("t", t)
        starts, factors, _ = self._pieces(device, t)
        return float(factors[np.searchsorted(starts, t, side="right") - 1])

    def finish_time(self, device: int, t0: float, amount: float, base_rate: float) -> float:
        """The t1 at which a phase of `amount` started at t0 at base rate `base_rate` is done."""
        if self._is_plain(device, t0, amount, base_rate):
            return t0 + amount / base_rate
        t1, all_ones = self._finish(device, float(t0), float(amount), float(base_rate))
        return t0 + amount / base_rate if all_ones else t1

    def duration(self, device: int, t0: float, amount: float, base_rate: float) -> float:
        """finish_time - t0; exactly amount / base_rate where the factor is 1 over the whole phase."""
        if self._is_plain(device, t0, amount, base_rate):
            return amount / base_rate
        t1, all_ones = self._finish(device, float(t0), float(amount), float(base_rate))
        return amount / base_rate if all_ones else t1 - t0

    def amount_done(self, device: int, t0: float, t1: float, base_rate: float) -> float:
        """integral_{t0}^{t1} base_rate f_d(t) dt: what a phase started at t0 has done when cut at t1."""
        _check_time("t0", t0)
        _check_time("t1", t1)
        _check_phase(0.0, base_rate)
        if t1 < t0:
            raise ValueError(f"t1 must be >= t0, got t0={t0!r}, t1={t1!r}")
        if self.is_constant(device):
            return (t1 - t0) * base_rate
        starts, factors, ends = self._pieces(device, t1)
        first = int(np.searchsorted(starts, t0, side="right")) - 1
        last = max(int(np.searchsorted(starts, t1, side="left")), first + 1)
        spans = np.minimum(ends[first:last], t1) - np.maximum(starts[first:last], t0)
        return float(np.sum(base_rate * factors[first:last] * spans))

    def steps(self, device: int) -> tuple[np.ndarray, np.ndarray]:
        """(times, factors) of the device's pieces before the current horizon (for plotting and checks)."""
        self._check_device(device)
        rows = slice(self._offsets[device], self._offsets[device + 1])
        return self._starts[rows].copy(), self._factors[rows].copy()

    def _is_plain(self, device, t0, amount, base_rate) -> bool:
        """Checks a phase's arguments; True where the answer is amount / base_rate without looking further."""
        _check_time("t0", t0)
        _check_phase(amount, base_rate)
        return self.is_constant(device) or amount == 0

    def _finish(self, device: int, t0: float, amount: float, base_rate: float) -> tuple[float, bool]:
        """(t1, whether the factor is 1 all over [t0, t1)). Walks the pieces from t0 in chunks; when it runs
        past the horizon it re-samples and starts again from t0, so that the arithmetic, and hence the answer,
        is the same whatever the horizon was."""
        t = t0
        while True:
            starts, factors, ends = self._pieces(device, t)
            first = int(np.searchsorted(starts, t0, side="right")) - 1
            remaining, all_ones = amount, True
            for lo in range(first, len(starts), CHUNK):
                hi = min(lo + CHUNK, len(starts))
                rates = base_rate * factors[lo:hi]
                begins = np.maximum(starts[lo:hi], t0)
                done = np.cumsum(rates * (ends[lo:hi] - begins))
                k = int(np.searchsorted(done, remaining, side="left"))  # first piece that finishes the phase
                all_ones = all_ones and bool((factors[lo : min(lo + k + 1, hi)] == 1).all())
                if k < len(done):
                    before = float(done[k - 1]) if k else 0.0
                    return float(begins[k]) + (remaining - before) / float(rates[k]), all_ones
                remaining -= float(done[-1])
            t = float(ends[-1])  # the horizon: sample past it

    def _pieces(self, device: int, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The device's (starts, factors, ends), sampled past t."""
        self._check_device(device)
        if self._ends[self._offsets[device + 1] - 1] <= t:
            self._extend_past(t)
        rows = slice(self._offsets[device], self._offsets[device + 1])
        return self._starts[rows], self._factors[rows], self._ends[rows]

    def _check_device(self, device: int) -> None:
        if not 0 <= device < self.n:
            raise IndexError(f"device {device} out of range for {self.n} devices")

    def _sample(self, horizon_s: float) -> None:
        starts, factors, last_ends = [np.empty(0)], [np.empty(0)], []
        for times, values in self._draws(horizon_s):
            device_starts, device_factors, last_end = _before_horizon(times, values, horizon_s)
            starts.append(device_starts)
            factors.append(device_factors)
            last_ends.append(last_end)
        self._offsets = np.concatenate([[0], np.cumsum([len(s) for s in starts[1:]], dtype=np.int64)])
        self._starts = np.concatenate(starts)
        self._factors = np.concatenate(factors)
        self._ends = np.empty_like(self._starts)
        self._ends[:-1] = self._starts[1:]
        self._ends[self._offsets[1:] - 1] = last_ends
        self._horizon_s = horizon_s


def _before_horizon(times, factors, horizon_s: float) -> tuple[np.ndarray, np.ndarray, float]:
    """A model's step function cut to its pieces starting before the horizon, with repeated factors joined,
    and the end of its last piece: math.inf if its next step is at infinity, else the horizon."""
    times, factors = np.asarray(times, dtype=np.float64), np.asarray(factors, dtype=np.float64)
    if len(times) == 0 or times[0] != 0 or len(factors) != len(times):
        raise ValueError("a rate model must return (times, factors) of equal length with times[0] = 0")
    kept = int(np.searchsorted(times, horizon_s, side="left"))
    last_end = math.inf if kept < len(times) and times[kept] == math.inf else horizon_s
    times, factors = times[:kept], factors[:kept]
    changes = np.concatenate([[True], factors[1:] != factors[:-1]])
    return times[changes], factors[changes], last_end


def load_rate_trace(path) -> TraceRate:
    """A TraceRate from a CSV (device,t_s,factor) or a JSON ({"period_s": ..., "traces": {...}}) file."""
    path = Path(path)
    try:
        if path.suffix.lower() == ".json":
            traces, period_s = _read_rate_json(path)
        else:
            traces, period_s = _read_rate_csv(path), None
    except UnicodeDecodeError:
        raise _malformed(path, "expected UTF-8 text") from None
    try:
        return TraceRate(traces=tuple(traces), period_s=period_s)
    except ValueError as error:
        raise _malformed(path, str(error)) from None


def _read_rate_csv(path: Path) -> list[np.ndarray]:
    rows_of: dict[int, list[tuple[float, float]]] = {}
    lines_of: dict[int, list[int]] = {}
    with _opened(path, "r", newline="", encoding="utf-8-sig") as file:
        reader = csv.reader(file)
        header = next(reader, None)
        if header is None:
            raise _malformed(path, f"empty file; expected a header {','.join(CSV_COLUMNS)} and rows")
        names = [name.strip() for name in header]
        missing = [column for column in CSV_COLUMNS if column not in names]
        if missing:
            raise _malformed(path, f"line 1: missing column {', '.join(missing)}; expected {','.join(CSV_COLUMNS)}")
        columns = [names.index(column) for column in CSV_COLUMNS]
        for row in reader:
            if not any(field.strip() for field in row):
                continue
            try:
                device, t_s, factor = (row[column] for column in columns)
                rows_of.setdefault(int(device), []).append((float(t_s), float(factor)))
            except (IndexError, ValueError):
                raise _malformed(
                    path, f"line {reader.line_num}: expected an integer device and numbers t_s, factor"
                ) from None
            lines_of.setdefault(int(device), []).append(reader.line_num)
    if not rows_of:
        raise _malformed(path, f"expected at least one row after the header {','.join(CSV_COLUMNS)}")
    traces = []
    for device in sorted(rows_of):
        problem = _trace_problem(rows_of[device])
        if problem is not None:
            row, what = problem
            raise _malformed(path, f"line {lines_of[device][row]}: device {device}: {what}")
        traces.append(np.array(rows_of[device]))
    return traces


def _read_rate_json(path: Path) -> tuple[list, object]:
    expected = 'expected JSON {"period_s": optional number, "traces": {"<id>": [[t_s, factor], ...]}}'
    with _opened(path, "r", encoding="utf-8-sig") as file:
        try:
            document = json.load(file)
        except ValueError:
            raise _malformed(path, expected) from None
    if not isinstance(document, dict) or not isinstance(document.get("traces"), dict) or not document["traces"]:
        raise _malformed(path, f"{expected} with at least one trace")
    unexpected = sorted(set(document) - set(JSON_KEYS))
    if unexpected:
        raise _malformed(path, f"unexpected key {unexpected[0]!r}; expected {', '.join(JSON_KEYS)}")
    ids = {}
    for key in document["traces"]:
        try:
            ids[key] = int(key)
        except ValueError:
            raise _malformed(path, f"trace id {key!r} must be an integer") from None
    traces = []
    for key in sorted(ids, key=ids.get):
        problem = _trace_problem(document["traces"][key])
        if problem is not None:
            row, what = problem
            raise _malformed(path, f"trace {key}{'' if row is None else f' row {row}'}: {what}")
        traces.append(document["traces"][key])
    return traces, document.get("period_s")
