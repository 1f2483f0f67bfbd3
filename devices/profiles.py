"""What one kind of device can do: compute rate, link speeds, latency, power draw, the memory it can train in,
and where the figures come from."""
import dataclasses
import math
from dataclasses import dataclass, field
from numbers import Real

_POSITIVE_FIELDS = ("peak_flops", "up_Bps", "down_Bps")
# Resource figures: None where a profile has none; a scenario that models the resource then asks for one.
POWER_FIELDS = ("train_W", "up_W", "down_W", "idle_W")
RESOURCE_FIELDS = POWER_FIELDS + ("memory_bytes",)
# The latency clock's roofline figures (testbed/latency/): None where a profile has none; `compute: latency` then
# asks for them, unless the profile carries a calibration.
ROOFLINE_FIELDS = ("memory_Bps", "call_overhead_s")
# The latency clock's sparse kernels (testbed/latency/clock.py): None where a device has none, as most runtimes
SPARSE_FIELD = "sparse_efficiency"


@dataclass(frozen=True)
class DeviceProfile:
    """One device kind. Training time is flops / train_flops_per_s; a transfer is latency_s + bytes / Bps.

    latency_s may be 0: FedLPS's cost model has no latency term, and reproducing it needs a profile without one.
    """

    name: str
    peak_flops: float  # FLOP/s as vendors quote it (two per fused multiply-add), fp32
    efficiency: float  # fraction of peak reached when training, in (0, 1]
    up_Bps: float  # uplink bytes/s
    down_Bps: float  # downlink bytes/s
    latency_s: float  # one-way network latency, seconds
    source: str  # where each figure comes from (or "assumed: why")
    # Power the whole device draws in each phase, watts: training, sending, receiving, and idle (awake, waiting)
    train_W: float | None = None
    up_W: float | None = None
    down_W: float | None = None
    idle_W: float | None = None
    memory_bytes: float | None = None  # RAM a training process may use (total RAM less the OS and apps)
    memory_Bps: float | None = None    # memory bandwidth, bytes/s (the latency clock's roofline)
    call_overhead_s: float | None = None  # seconds each dispatched operation costs beyond its work (the same)
    # sparse kernels: the share of its dense rate a device reaches on a masked model's kept entries, in (0, 1]
    sparse_efficiency: float | None = None
    latency: object = field(default=None, compare=False)   # a calibration (devices/latency.Calibrated) or None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.source, str):
            raise ValueError(f"source must be a string, got {self.source!r}")
        for name in _POSITIVE_FIELDS:
            _set_number(self, name, lambda x: x > 0, "a finite number > 0")
        _set_number(self, "efficiency", lambda x: 0 < x <= 1, "a number in (0, 1]")
        _set_number(self, "latency_s", lambda x: x >= 0, "a finite number >= 0")
        for name in RESOURCE_FIELDS:
            if getattr(self, name) is not None:
                _set_number(self, name, lambda x: x >= 0 if name in POWER_FIELDS else x > 0,
                            "a finite number >= 0" if name in POWER_FIELDS else "a finite number > 0")
        if self.memory_Bps is not None:
            _set_number(self, "memory_Bps", lambda x: x > 0, "a finite number > 0")
        if self.call_overhead_s is not None:
            _set_number(self, "call_overhead_s", lambda x: x >= 0, "a finite number >= 0")
        if self.sparse_efficiency is not None:
            _set_number(self, "sparse_efficiency", lambda x: 0 < x <= 1, "a number in (0, 1]")

    @property
    def missing_roofline(self) -> list[str]:
        """The roofline figures compute: latency needs of a profile without a calibration, that it lacks."""
        return [] if self.latency is not None else [f for f in ROOFLINE_FIELDS if getattr(self, f) is None]

    @property
    def train_flops_per_s(self) -> float:
        return self.peak_flops * self.efficiency

    def scaled(self, capability: float) -> "DeviceProfile":
        """The same device with `capability` of its compute, as FedLPS's capability levels z_k."""
        if not _is_number(capability) or not capability > 0:
            raise ValueError(f"capability must be a finite number > 0, got {capability!r}")
        return dataclasses.replace(
            self, name=f"{self.name}@{capability:g}", peak_flops=self.peak_flops * capability
        )

    def with_overrides(self, **fields) -> "DeviceProfile":
        """A copy with some fields changed, validated like any new profile."""
        known = [f.name for f in dataclasses.fields(self)]
        unknown = sorted(set(fields) - set(known))
        if unknown:
            raise ValueError(f"unknown DeviceProfile field {unknown[0]!r}; choose from: {', '.join(known)}")
        return dataclasses.replace(self, **fields)


def _is_number(value) -> bool:
    # bool is an int, but True FLOP/s is a configuration mistake, not a number.
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def _set_number(profile: DeviceProfile, field: str, accept, expected: str) -> None:
    value = getattr(profile, field)
    if not _is_number(value) or not accept(value):
        raise ValueError(f"{field} must be {expected}, got {value!r}")
    object.__setattr__(profile, field, float(value))  # numpy scalars and ints become plain floats
