"""A fleet of devices as numpy arrays (one entry a device), built from groups of identical devices."""
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .availability import AlwaysOn, AvailabilityModel
from .fleet_availability import Availability
from .battery import Batteries, BatterySpec
from .intervals import read_only
from .profiles import POWER_FIELDS, DeviceProfile
from .rates import Constant, Rates
from .seeding import child_seed

# Independent random streams under the fleet's seed, one a purpose, so that none shifts another.
STATIC_TIERS_STREAM = 0  # key (STATIC_TIERS_STREAM, group): a group's tiers drawn once
ROUND_TIERS_STREAM = 1  # key (ROUND_TIERS_STREAM, round, group): a dynamic group's tiers in one round
AVAILABILITY_STREAM = 2  # key (AVAILABILITY_STREAM,): every device's on/off intervals
SPEED_STREAM = 3  # key (SPEED_STREAM,): every device's FLOP/s factor over time
BANDWIDTH_STREAM = 4  # key (BANDWIDTH_STREAM,): every device's link-rate factor over time
BATTERY_STREAM = 5  # key (BATTERY_STREAM,): initial levels and charging intervals


@dataclass(frozen=True)
class GroupSpec:
    """`count` devices of one profile, with one availability model and, optionally, capability tiers.

    tiers: capability levels z, one drawn uniformly per device (FedLPS's z_k, after HeteroFL); a device trains
    at z of its profile's compute. resample_tiers_each_round: FedLPS's "dynamic" mode, where every device's
    level is redrawn every round because its available resources change.
    """

    profile: DeviceProfile
    count: int
    availability: AvailabilityModel = AlwaysOn()
    tiers: tuple[float, ...] | None = None
    resample_tiers_each_round: bool = False
    battery: BatterySpec | None = None
    speed: object | None = None       # a rate model of devices/rates.py
    bandwidth: object | None = None

    def __post_init__(self):
        if not isinstance(self.profile, DeviceProfile):
            raise ValueError(f"profile must be a DeviceProfile, got {self.profile!r}")
        if isinstance(self.count, bool) or not isinstance(self.count, (int, np.integer)) or self.count < 1:
            raise ValueError(f"count must be an integer >= 1, got {self.count!r}")
        if not callable(getattr(self.availability, "sample", None)):
            raise ValueError(f"availability must be an availability model, got {self.availability!r}")
        if self.tiers is not None:
            tiers = tuple(float(z) for z in self.tiers)
            if not tiers or not all(math.isfinite(z) and 0 < z <= 1 for z in tiers):
                raise ValueError(f"tiers must be a non-empty sequence of levels in (0, 1], got {self.tiers!r}")
            object.__setattr__(self, "tiers", tiers)
        if self.resample_tiers_each_round and self.tiers is None:
            raise ValueError("resample_tiers_each_round needs tiers to resample from")


@dataclass(frozen=True, eq=False)
class Fleet:
    """Per-device arrays, devices numbered group after group. Tiers are drawn on demand from named streams,
    so tier_at(r) is a pure function of (seed, r)."""

    profile_name: np.ndarray  # (n,) str
    group: np.ndarray  # (n,) int: index into groups
    peak_flops: np.ndarray  # (n,) float64, FLOP/s
    efficiency: np.ndarray
    up_Bps: np.ndarray
    down_Bps: np.ndarray
    latency_s: np.ndarray
    power_W: dict[str, np.ndarray]  # (n,) watts per POWER_FIELDS name; NaN where the profile has no figure
    memory_bytes: np.ndarray  # (n,) RAM for training; NaN where the profile has no figure
    availability: Availability
    groups: tuple[GroupSpec, ...]
    seed: np.random.SeedSequence
    speed: Rates | None = None  # None: no group's FLOP/s fluctuates
    bandwidth: Rates | None = None
    batteries: Batteries | None = None  # None: no group has a battery

    @classmethod
    def build(cls, groups: Sequence[GroupSpec], seed: np.random.SeedSequence) -> "Fleet":
        groups = tuple(groups)
        if not groups:
            raise ValueError("a fleet needs at least one group")
        counts = [g.count for g in groups]

        def per_device(values, dtype=np.float64):
            return read_only(np.repeat(np.asarray(values, dtype=dtype), counts))

        profiles = [g.profile for g in groups]

        def figure(field):
            return per_device([np.nan if getattr(p, field) is None else getattr(p, field) for p in profiles])

        def rates(field, stream):
            models = [getattr(g, field) for g in groups]
            if all(m is None for m in models):
                return None
            return Rates([(m or Constant(), c) for m, c in zip(models, counts)], child_seed(seed, stream))

        return cls(
            profile_name=per_device([p.name for p in profiles], dtype=str),
            group=per_device(range(len(groups)), dtype=np.int64),
            peak_flops=per_device([p.peak_flops for p in profiles]),
            efficiency=per_device([p.efficiency for p in profiles]),
            up_Bps=per_device([p.up_Bps for p in profiles]),
            down_Bps=per_device([p.down_Bps for p in profiles]),
            latency_s=per_device([p.latency_s for p in profiles]),
            power_W={field: figure(field) for field in POWER_FIELDS},
            memory_bytes=figure("memory_bytes"),
            availability=Availability(
                [(g.availability, g.count) for g in groups], child_seed(seed, AVAILABILITY_STREAM)
            ),
            groups=groups,
            seed=seed,
            speed=rates("speed", SPEED_STREAM),
            bandwidth=rates("bandwidth", BANDWIDTH_STREAM),
            batteries=None if all(g.battery is None for g in groups) else
            Batteries([(g.battery, g.count) for g in groups], child_seed(seed, BATTERY_STREAM)),
        )

    @property
    def n(self) -> int:
        return len(self.group)

    def tier_at(self, round_index: int) -> np.ndarray:
        """(n,) capability z of every device in that round; 1.0 for devices of groups without tiers."""
        if isinstance(round_index, bool) or not isinstance(round_index, (int, np.integer)) or round_index < 0:
            raise ValueError(f"round_index must be an integer >= 0, got {round_index!r}")
        tiers = np.ones(self.n)
        first = 0
        for group_index, g in enumerate(self.groups):
            if g.tiers is not None:
                if g.resample_tiers_each_round:
                    key = (ROUND_TIERS_STREAM, int(round_index), group_index)
                else:
                    key = (STATIC_TIERS_STREAM, group_index)
                rng = np.random.default_rng(child_seed(self.seed, *key))
                tiers[first : first + g.count] = rng.choice(g.tiers, size=g.count)
            first += g.count
        return tiers

    @property
    def tiers_change_each_round(self) -> bool:
        """Whether some group redraws its tiers each round: else tier_at (and train_flops_per_s) is the same in
        every round."""
        return any(g.tiers is not None and g.resample_tiers_each_round for g in self.groups)

    def train_flops_per_s(self, round_index: int) -> np.ndarray:
        """(n,) FLOP/s each device trains at in that round: peak * efficiency * tier."""
        return self.peak_flops * self.efficiency * self.tier_at(round_index)
