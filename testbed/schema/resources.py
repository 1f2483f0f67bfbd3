"""Resource sections of the scenario schema, each optional and off by default: a group's battery and fluctuating
speed and bandwidth (fleet.groups[i].battery / speed / bandwidth), and the run-wide `resources:` switches
(energy accounting, idle energy, memory limits). Semantics: testbed/resources/ and devices/battery.py,
devices/rates.py."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import (Field, NonNegativeFloat, PositiveFloat, ValidationInfo, field_validator,
                      model_validator)

import devices
from testbed.errors import TestbedError
from testbed.schema.availability import Availability
from testbed.schema.common import Strict, existing_file

# ---- batteries ----------------------------------------------------------------------------------------
# Assumed default charger: USB Battery Charging 1.2 allows 1.5 A at 5 V from a dedicated charging port, 7.5 W.
USB_BC12_CHARGE_W = 7.5


class NeverCharged(Strict):
    kind: Literal["none"] = "none"

    def model(self):
        return None


class UniformLevel(Strict):
    """An initial level drawn uniformly per device in [low, high] (fractions of capacity)."""

    low: float = Field(ge=0, le=1)
    high: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self):
        if self.low > self.high:
            raise ValueError(f"low {self.low} is above high {self.high}; give low <= high")
        return self


class Battery(Strict):
    """A group's batteries: capacity, starting level, the level below which a device refuses work, and when it
    charges (`charging`: none, always_on, diurnal window, markov or trace of plug-in intervals, as availability)."""

    capacity_Wh: PositiveFloat
    initial_level: Annotated[float, Field(ge=0, le=1)] | UniformLevel = 1.0
    min_level: Annotated[float, Field(ge=0, lt=1)] = 0.0
    charge_W: NonNegativeFloat = USB_BC12_CHARGE_W
    background_W: NonNegativeFloat = 0.0       # what the owner's own use draws while no task runs
    charging: Annotated[Union[NeverCharged, Availability], Field(discriminator="kind")] = NeverCharged()

    def spec(self):
        level = self.initial_level
        return devices.BatterySpec(self.capacity_Wh, level if isinstance(level, float) else (level.low, level.high),
                                   self.min_level, self.charge_W, self.background_W, self.charging.model())


# ---- fluctuating rates --------------------------------------------------------------------------------
class MarkovSlowdown(Strict):
    """Exponential normal and slowed periods (thermal throttling, background load): `factor` while slowed."""

    kind: Literal["markov"]
    factor: PositiveFloat
    mean_normal_s: PositiveFloat
    mean_slow_s: PositiveFloat
    start: Literal["stationary", "normal", "slow"] = "stationary"

    def model(self):
        return devices.MarkovSlowdown(self.factor, self.mean_normal_s, self.mean_slow_s, self.start)


class DiurnalRate(Strict):
    """`factor` every day between local start_hour and end_hour (a busy evening link, a phone in use)."""

    kind: Literal["diurnal"]
    factor: PositiveFloat
    start_hour: float = Field(ge=0, lt=24)
    end_hour: float = Field(ge=0, lt=24)
    timezone_spread_h: float = Field(0.0, ge=0, le=24)
    jitter_s: NonNegativeFloat = 0.0

    def model(self):
        return devices.DiurnalRate(self.factor, self.start_hour, self.end_hour, self.timezone_spread_h,
                                   self.jitter_s)


class RateTrace(Strict):
    """Replays (t, factor) steps per device from a CSV `device,t_s,factor` or a JSON file (devices/rates.py)."""

    kind: Literal["trace"]
    file: Path
    assignment: Literal["cycle", "random"] = "cycle"

    @field_validator("file")
    @classmethod
    def _exists(cls, path: Path, info: ValidationInfo) -> Path:
        resolved = existing_file(path, info, "rate trace")
        try:
            devices.load_rate_trace(resolved)  # a malformed trace is refused with the field that names it
        except OSError as err:
            raise ValueError(f"{resolved}: unreadable ({err.strerror})") from None
        return resolved

    def model(self):
        try:
            trace = devices.load_rate_trace(self.file)
        except (OSError, ValueError) as err:  # changed since validation
            raise TestbedError(str(err)) from None
        return devices.TraceRate(trace.traces, trace.period_s, self.assignment)


Rate = Annotated[Union[MarkovSlowdown, DiurnalRate, RateTrace], Field(discriminator="kind")]


# ---- run-wide switches ----------------------------------------------------------------------------------
class Resources(Strict):
    """energy: each phase's joules in events.csv, each round's in rounds.csv, totals and energy-to-accuracy in
    summary.json (on by itself where a group has a battery). idle_energy: a device that uploaded also draws its
    idle watts until its round closes. memory: a device trains only what fits its RAM (on by itself where a
    group sets memory_MB)."""

    energy: bool = False
    idle_energy: bool = False
    memory: bool = False

    @model_validator(mode="after")
    def _idle_needs_energy(self):
        if self.idle_energy and not self.energy:
            raise ValueError("idle_energy counts energy: set resources.energy: true as well")
        return self
