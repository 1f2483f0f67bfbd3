"""Device batteries on the simulated clock: how much energy each device holds, and when it may work.

Semantics, exactly:
- A battery holds level joules, 0 <= level <= capacity = capacity_Wh * 3600.
- Its level changes at rate  charge_W * plugged(t) - draw(t),  clamped to [0, capacity]: a full battery on the
  charger stays full, an empty one stays empty. Charging is constant power charge_W into the battery (no CC/CV
  taper near full).
- draw(t) is the watts of the load piece (start_s, end_s, W) running at t, or background_W (the owner's own use)
  when no piece runs.
- plugged(t) comes from an availability model (AlwaysOn, Diurnal, TraceIntervals... or None: never plugged),
  sampled by `Availability`: "online" there means "on the charger" here.
- A device is eligible for work at t when level(t) >= min_level * capacity.
- A load empties the battery at the first instant, between its t0 and its last piece's end, at which the level
  is 0 and the draw exceeds the charging (`empty_at`); the task is dropped then. A load that brings the level
  to exactly 0 as it ends completes.
- Devices of a group without a battery (mains-powered boards) are always eligible and never empty.
- Answers start from each device's settled state: no task load after it; a query before it is a ValueError.

Each device has a settled state (t_settled, level_J); every answer integrates from it, stretch by stretch (a
stretch: constant draw and plug state), as level = clamp(level + rate * (end - start)) in plain floats. Crossing
instants are start + (target - level) / rate within the stretch, moved up by an ulp or two where rounding left
the level a hair short, so that level_at(d, empty_at(...)) after settling is 0 and eligible(next_eligible(t)) holds.
"""
import math
from dataclasses import dataclass
from numbers import Real
from typing import Iterator, Sequence

import numpy as np

from .availability import DAY_S, AvailabilityModel, TraceIntervals
from .fleet_availability import Availability
from .seeding import child_seed

J_PER_WH = 3600.0
# Independent random streams under the batteries' seed.
CHARGING_STREAM = 0  # key (CHARGING_STREAM,): the plugged-in intervals, one Availability group a battery group
INITIAL_LEVEL_STREAM = 1  # key (INITIAL_LEVEL_STREAM, group): a group's drawn initial levels
# eligible() decides without walking where the level surely clears min_level by this fraction of capacity: far
# more than the rounding of a walk (an ulp of the level, ~1e-16 of capacity, a stretch).
ROUNDING_MARGIN = 1e-6
# A trace without any interval: never on the charger.
NEVER_PLUGGED = TraceIntervals((np.empty((0, 2)),), (None,))

Load = Sequence[tuple[float, float, float]]


def _is_number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def _fraction(field: str, value, below_one: bool = False) -> float:
    if not _is_number(value) or not (0 <= value < 1 if below_one else 0 <= value <= 1):
        raise ValueError(f"{field} must be a fraction of capacity in [0, {'1)' if below_one else '1]'}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class BatterySpec:
    """One group's batteries. initial_level: a fraction of capacity, or (low, high): drawn uniformly per device."""

    capacity_Wh: float
    initial_level: float | tuple[float, float] = 1.0
    min_level: float = 0.0  # the device refuses work below min_level * capacity
    charge_W: float = 0.0  # power into the battery while plugged in
    background_W: float = 0.0  # the owner's use while the device runs no task
    charging: AvailabilityModel | None = None  # when the device is plugged in; None: never

    def __post_init__(self):
        if not _is_number(self.capacity_Wh) or not self.capacity_Wh > 0:
            raise ValueError(f"capacity_Wh must be a finite number > 0, got {self.capacity_Wh!r}")
        object.__setattr__(self, "capacity_Wh", float(self.capacity_Wh))
        if isinstance(self.initial_level, tuple):
            if len(self.initial_level) != 2:
                raise ValueError(f"initial_level must be a fraction or a (low, high) pair, got {self.initial_level!r}")
            low, high = (_fraction("initial_level", x) for x in self.initial_level)
            if low > high:
                raise ValueError(f"initial_level (low, high) needs low <= high, got {self.initial_level!r}")
            object.__setattr__(self, "initial_level", (low, high))
        else:
            object.__setattr__(self, "initial_level", _fraction("initial_level", self.initial_level))
        object.__setattr__(self, "min_level", _fraction("min_level", self.min_level, below_one=True))
        for field in ("charge_W", "background_W"):
            value = getattr(self, field)
            if not _is_number(value) or value < 0:
                raise ValueError(f"{field} must be a finite number >= 0, got {value!r}")
            object.__setattr__(self, field, float(value))
        if self.charging is not None and not callable(getattr(self.charging, "sample", None)):
            raise ValueError(f"charging must be None or an availability model, got {self.charging!r}")


def _advance(level: float, rate: float, dt: float, capacity: float) -> float:
    """The level after dt seconds at a constant rate, clamped to [0, capacity]."""
    if rate > 0:
        return min(capacity, level + rate * dt)
    if rate < 0:
        return max(0.0, level + rate * dt)
    return level


def _crossing(start: float, level: float, rate: float, target: float) -> float:
    """The instant the level, from `level` at `start` at a constant nonzero rate, reaches target: the plain
    formula, moved up by ulps until the level computed there has reached it (rounding may leave it short)."""
    t = start + (target - level) / rate
    while (level + rate * (t - start) < target) if rate > 0 else (level + rate * (t - start) > target):
        t = math.nextafter(t, math.inf)
    return t


def _checked_load(load: Load) -> list[tuple[float, float, float]]:
    pieces = [(float(s), float(e), float(w)) for s, e, w in load]
    previous_end = -math.inf
    for s, e, w in pieces:
        if not (math.isfinite(s) and math.isfinite(e) and s <= e):
            raise ValueError(f"load pieces need finite start_s <= end_s, got {(s, e, w)!r}")
        if not (math.isfinite(w) and w >= 0):
            raise ValueError(f"load watts must be a finite number >= 0, got {(s, e, w)!r}")
        if s < previous_end:
            raise ValueError(f"load pieces must be sorted and must not overlap, got {(s, e, w)!r} after {previous_end}")
        previous_end = e
    return pieces


class Batteries:
    """Every device's battery, devices numbered group after group as in the fleet.

    max_wait_s: next_eligible gives up (inf) on a device that would not be eligible within that long, as when
    its charging windows never make up for the drain between them.
    """

    def __init__(
        self,
        groups: Sequence[tuple[BatterySpec | None, int]],
        seed: np.random.SeedSequence,
        max_wait_s: float = 365 * DAY_S,
    ):
        if not (_is_number(max_wait_s) and max_wait_s > 0):
            raise ValueError(f"max_wait_s must be a finite number > 0, got {max_wait_s!r}")
        self._max_wait_s = float(max_wait_s)
        specs, counts = [], []
        for spec, count in groups:
            if spec is not None and not isinstance(spec, BatterySpec):
                raise ValueError(f"a group's battery must be a BatterySpec or None, got {spec!r}")
            if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
                raise ValueError(f"count must be an integer >= 0, got {count!r}")
            specs.append(spec)
            counts.append(int(count))

        def per_device(values):
            return np.repeat(np.asarray(values, dtype=np.float64), counts)

        self._capacity_J = per_device([math.nan if s is None else s.capacity_Wh * J_PER_WH for s in specs])
        self._min_J = per_device([math.nan if s is None else s.min_level for s in specs]) * self._capacity_J
        self._background_W = per_device([0.0 if s is None else s.background_W for s in specs])
        self._charge_W = per_device([0.0 if s is None or s.charging is None else s.charge_W for s in specs])
        self._has_battery = ~np.isnan(self._capacity_J)
        self._has_battery.setflags(write=False)
        self._plugged = Availability(
            [(s.charging if s is not None and s.charging is not None and s.charge_W > 0 else NEVER_PLUGGED, count)
             for s, count in zip(specs, counts)],
            child_seed(seed, CHARGING_STREAM),
        )
        fractions = []
        for group_index, (spec, count) in enumerate(zip(specs, counts)):
            if spec is None:
                fractions.append(np.full(count, math.nan))
            elif isinstance(spec.initial_level, tuple):
                rng = np.random.default_rng(child_seed(seed, INITIAL_LEVEL_STREAM, group_index))
                fractions.append(rng.uniform(*spec.initial_level, size=count))
            else:
                fractions.append(np.full(count, spec.initial_level))
        levels = np.concatenate(fractions) * self._capacity_J if fractions else np.empty(0)
        self.restore({"t_settled": np.zeros(self.n), "level_J": levels})

    @property
    def n(self) -> int:
        return len(self._capacity_J)

    @property
    def capacity_J(self) -> np.ndarray:
        """(n,) capacity in joules; nan for devices without a battery."""
        return self._capacity_J.copy()

    def has_battery(self) -> np.ndarray:
        """(n,) bool: which devices run on a battery."""
        return self._has_battery.copy()

    def level_at(self, device: int, t: float) -> float:
        """Joules at t >= the device's settled instant, with no task load after it; nan without a battery."""
        self._check_time(device, t)
        return self._level_after(device, t, [], cache_until=t) if self._has_battery[device] else math.nan

    def levels_at(self, t: float) -> np.ndarray:
        """(n,) levels at t as fractions of capacity; nan for devices without a battery."""
        return np.array([self.level_at(d, t) for d in range(self.n)]) / self._capacity_J

    def eligible(self, t: float) -> np.ndarray:
        """(n,) bool: no battery, or level >= min_level * capacity at t."""
        eligible = self._surely_eligible(t)
        for d in np.flatnonzero(~eligible):
            eligible[d] = self.level_at(d, t) >= self._min_J[d]
        return eligible

    def next_eligible(self, t: float) -> np.ndarray:
        """(n,) the first instant >= t each device is eligible with no task load: t if eligible now; inf if never
        (below min_level and never plugged, or charging that never outruns the drain within max_wait_s)."""
        eligible = self.eligible(t)
        return np.array([float(t) if eligible[d] else self._next_eligible(d, t) for d in range(self.n)])

    def empty_at(self, device: int, t0: float, load: Load) -> float:
        """The first instant in [t0, the last piece's end) at which the level is 0 while the draw exceeds the
        charging, under `load`: (start_s, end_s, W) pieces, sorted, back to back or with gaps at background_W.
        inf if never or without a battery."""
        self._check_time(device, t0)
        pieces = _checked_load(load)
        if not self._has_battery[device] or not pieces:
            return math.inf
        for start, end, rate, level, _ in self._walk(device, pieces[-1][1], pieces, cache_until=t0):
            if end > t0 and rate < 0 and level + rate * (end - start) < 0:
                return max(float(t0), min(end, _crossing(start, level, rate, 0.0)))
        return math.inf

    def settle(self, device: int, t_end: float, load: Load = ()) -> None:
        """Advance the device's settled state to t_end, applying the parts of the load pieces that lie between its
        settled instant and t_end (background draw and charging elsewhere, all clamped)."""
        self._check_time(device, t_end)
        pieces = _checked_load(load)
        if self._has_battery[device]:
            self._level_J[device] = self._level_after(device, t_end, pieces, cache_until=t_end)
        self._t_settled[device] = t_end
        self._resume_t[device], self._resume_level_J[device] = t_end, self._level_J[device]

    def state(self) -> dict[str, np.ndarray]:
        """Settled instants and levels (nan without a battery), for checkpoints."""
        return {"t_settled": self._t_settled.copy(), "level_J": self._level_J.copy()}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        t_settled = np.array(state["t_settled"], dtype=np.float64)
        level_J = np.array(state["level_J"], dtype=np.float64)
        if t_settled.shape != (self.n,) or level_J.shape != (self.n,):
            raise ValueError(f"state needs t_settled and level_J of shape ({self.n},)")
        if not np.isfinite(t_settled).all():
            raise ValueError("state's t_settled must be finite")
        levels = level_J[self._has_battery]
        if not ((levels >= 0) & (levels <= self._capacity_J[self._has_battery])).all():
            raise ValueError("state's level_J must lie in [0, capacity] for every device with a battery")
        level_J[~self._has_battery] = math.nan
        self._t_settled, self._level_J = t_settled, level_J
        # Per device, a point (t, level) of the no-load walk from the settled state at a stretch boundary, from
        # which a later walk may resume: the walk is a fold over stretches, so resuming there changes no answer.
        self._resume_t, self._resume_level_J = t_settled.copy(), level_J.copy()

    def _surely_eligible(self, t: float) -> np.ndarray:
        """(n,) bool: eligible at t without a walk. From any point of the no-load walk the level falls at most at
        background_W, so level(t) >= level - background_W * (t - point); the margin covers the walk's rounding."""
        if not math.isfinite(t):
            raise ValueError(f"time must be finite, got {t!r}")
        for device in np.flatnonzero(t < self._t_settled)[:1]:
            self._check_time(int(device), t)
        resumable = self._resume_t <= t
        since = np.where(resumable, self._resume_t, self._t_settled)
        level = np.where(resumable, self._resume_level_J, self._level_J)
        lowest = level - self._background_W * (t - since)
        return ~self._has_battery | (self._min_J == 0) | (lowest >= self._min_J + ROUNDING_MARGIN * self._capacity_J)

    def _next_eligible(self, device: int, t: float) -> float:
        """The first instant >= t the device is eligible, for one that is not eligible at t."""
        target = self._min_J[device]
        if not self._charge_W[device] > self._background_W[device]:  # the level never rises
            return math.inf
        for start, end, rate, level, _ in self._walk(device, math.inf, [], cache_until=t):
            if start > t + self._max_wait_s:
                return math.inf
            if end > t and rate > 0 and level + rate * (end - start) >= target:
                return max(float(t), _crossing(start, level, rate, target))
            if end == math.inf:
                return math.inf
        return math.inf

    def _check_time(self, device: int, t: float) -> None:
        if not 0 <= device < self.n:
            raise IndexError(f"device {device} out of range for {self.n} devices")
        if not math.isfinite(t):
            raise ValueError(f"time must be finite, got {t!r}")
        if t < self._t_settled[device]:
            raise ValueError(f"t = {t} is before device {device}'s settled instant {self._t_settled[device]}")

    def _resume_point(self, device: int, limit: float) -> tuple[float, float]:
        if self._resume_t[device] <= limit:
            return float(self._resume_t[device]), float(self._resume_level_J[device])
        return float(self._t_settled[device]), float(self._level_J[device])

    def _level_after(self, device: int, t_to: float, pieces: list, cache_until: float) -> float:
        level = math.nan
        for *_, level in self._walk(device, t_to, pieces, cache_until):
            pass
        return level

    def _walk(self, device: int, t_to: float, pieces: list, cache_until: float) -> Iterator[tuple]:
        """(start, end, rate_W, level_J at start, level_J at end) of each stretch from the settled state to t_to,
        then an empty one (t_to, t_to, 0, level, level). Boundaries before the first piece and before
        cache_until are kept to resume from."""
        settled = self._t_settled[device]
        pieces = [(max(s, settled), e, w) for s, e, w in pieces if e > settled]
        first_piece = pieces[0][0] if pieces else math.inf
        t, level = self._resume_point(device, min(t_to, first_piece))
        capacity, charge_W = self._capacity_J[device], self._charge_W[device]
        index = 0
        while t < t_to:
            while index < len(pieces) and pieces[index][1] <= t:
                index += 1
            if index < len(pieces) and pieces[index][0] <= t:
                draw, draw_until = pieces[index][2], pieces[index][1]
            else:
                draw = self._background_W[device]
                draw_until = pieces[index][0] if index < len(pieces) else math.inf
            plugged, plug_until = False, math.inf
            if charge_W > 0:
                plug_until = self._plugged.online_until(device, t)
                plugged = plug_until > t
                if not plugged:
                    plug_until = self._plugged.next_online(device, t)
            end = min(draw_until, plug_until, t_to)
            rate = (charge_W if plugged else 0.0) - draw
            before, level = level, _advance(level, rate, end - t, capacity)
            if end == plug_until < math.inf and end <= min(first_piece, cache_until):
                self._resume_t[device], self._resume_level_J[device] = end, level
            yield t, end, rate, before, level
            t = end
        yield t, t, 0.0, level, level
