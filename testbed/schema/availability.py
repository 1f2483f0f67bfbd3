"""When devices are online (fleet.groups[i].availability), and when batteries charge (battery.charging): the
availability models of devices/availability.py."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import Field, NonNegativeFloat, PositiveFloat, ValidationInfo, field_validator

import devices
from testbed.errors import TestbedError
from testbed.schema.common import Strict, existing_file


class AlwaysOn(Strict):
    kind: Literal["always_on"] = "always_on"

    def model(self):
        return devices.AlwaysOn()


class Markov(Strict):
    """On/off periods with exponential durations."""

    kind: Literal["markov"]
    mean_on_s: PositiveFloat
    mean_off_s: PositiveFloat
    start: Literal["stationary", "on", "off"] = "stationary"

    def model(self):
        return devices.MarkovOnOff(self.mean_on_s, self.mean_off_s, self.start)


class Diurnal(Strict):
    """Online every night in a local window (phones charging), with daily jitter and time-zone spread."""

    kind: Literal["diurnal"]
    on_hour: float = Field(22.0, ge=0, lt=24)
    off_hour: float = Field(6.0, ge=0, lt=24)
    jitter_s: NonNegativeFloat = 1800.0
    timezone_spread_h: float = Field(0.0, ge=0, le=24)

    def model(self):
        return devices.Diurnal(self.on_hour, self.off_hour, self.jitter_s, self.timezone_spread_h)


class Trace(Strict):
    """Replays recorded on-intervals: a CSV `device,start_s,end_s`, or FedScale's client_behave_trace."""

    kind: Literal["trace"]
    file: Path
    format: Literal["intervals", "fedscale"] = "intervals"
    assignment: Literal["cycle", "random"] = "cycle"

    @field_validator("file")
    @classmethod
    def _exists(cls, path: Path, info: ValidationInfo) -> Path:
        return existing_file(path, info, "trace file")

    def model(self):
        load = devices.load_fedscale_trace if self.format == "fedscale" else devices.load_interval_trace
        try:
            trace = load(self.file)
        except (OSError, ValueError) as err:
            raise TestbedError(str(err)) from None
        return devices.TraceIntervals(trace.traces, trace.period_s, self.assignment)


Availability = Annotated[Union[AlwaysOn, Markov, Diurnal, Trace], Field(discriminator="kind")]
