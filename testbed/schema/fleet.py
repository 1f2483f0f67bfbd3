"""The fleet's section of the scenario schema: device groups (a catalog profile, overrides of its figures,
availability, capability tiers) and the server's hardware."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import (Field, NonNegativeFloat, PositiveFloat, PositiveInt, ValidationInfo, field_validator,
                      model_validator)

import devices
from testbed.errors import TestbedError
from testbed.schema.common import Capability, Strict, registered, relative_to_scenario


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
        resolved = relative_to_scenario(path, info)
        if not resolved.is_file():
            raise ValueError(f"no trace file at {resolved}; give a path relative to the scenario file")
        return resolved

    def model(self):
        load = devices.load_fedscale_trace if self.format == "fedscale" else devices.load_interval_trace
        try:
            trace = load(self.file)
        except (OSError, ValueError) as err:
            raise TestbedError(str(err)) from None
        return devices.TraceIntervals(trace.traces, trace.period_s, self.assignment)


Availability = Annotated[Union[AlwaysOn, Markov, Diurnal, Trace], Field(discriminator="kind")]


class DeviceGroup(Strict):
    profile: registered("device profile", devices.CATALOG)
    count: PositiveInt
    availability: Availability = AlwaysOn()
    tiers: list[Capability] | None = None       # capability levels z, drawn uniformly per device (FedLPS)
    resample_tiers_each_round: bool = False     # FedLPS's "dynamic" setting
    # Overrides of the catalog profile's figures:
    peak_flops: PositiveFloat | None = None
    efficiency: Capability | None = None
    up_Bps: PositiveFloat | None = None
    down_Bps: PositiveFloat | None = None
    latency_s: NonNegativeFloat | None = None

    @model_validator(mode="after")
    def _resample_needs_tiers(self):
        if self.resample_tiers_each_round and not self.tiers:
            raise ValueError("resample_tiers_each_round needs tiers: list the capability levels to draw from")
        return self

    def spec(self, tiers_kept: int | None = None):
        """The group as devices build it; tiers_kept: only the first so many of its tiers (fleet.heterogeneity)."""
        overrides = {k: getattr(self, k) for k in ("peak_flops", "efficiency", "up_Bps", "down_Bps", "latency_s")
                     if getattr(self, k) is not None}
        profile = devices.get_profile(self.profile).with_overrides(**overrides)
        return devices.GroupSpec(profile, self.count, self.availability.model(),
                                 tuple(self.tiers[:tiers_kept]) if self.tiers else None,
                                 self.resample_tiers_each_round)


# fleet.heterogeneity: how many of each tiered group's tiers are kept, from the first (FedLPS: 2, 3 or all 5)
HETEROGENEITY_TIERS = {"low": 2, "medium": 3, "high": None}
MIN_TIERS_FOR_LEVELS = 4  # fewer, and two of low / medium / high would be the same fleet


class Fleet(Strict):
    groups: list[DeviceGroup] = Field(min_length=1)
    heterogeneity: Literal["low", "medium", "high"] | None = None   # the tiered groups' first 2, 3 or all tiers

    @field_validator("heterogeneity")
    @classmethod
    def _levels_need_tiers(cls, level: str | None, info: ValidationInfo) -> str | None:
        groups = info.data.get("groups") or []
        if level is None or not groups:  # nothing to check, or the groups already failed on their own
            return level
        if not any(g.tiers for g in groups):
            raise ValueError("no group of this fleet has tiers to keep 2, 3 or all of; give a group capability "
                             "tiers (tiers: [1, 0.5, 0.25, 0.125, 0.0625]) or remove heterogeneity")
        for i, g in enumerate(groups):
            if g.tiers and len(g.tiers) < MIN_TIERS_FOR_LEVELS:
                raise ValueError(f"fleet.groups.{i} has {len(g.tiers)} tiers; low, medium and high keep the first "
                                 f"2, 3 or all of them, so list at least {MIN_TIERS_FOR_LEVELS} "
                                 "(e.g. [1, 0.5, 0.25, 0.125, 0.0625])")
        return level

    @property
    def size(self) -> int:
        return sum(g.count for g in self.groups)

    def specs(self) -> list:
        """Every group as devices build it, tiers cut to the heterogeneity level."""
        kept = HETEROGENEITY_TIERS[self.heterogeneity] if self.heterogeneity else None
        return [g.spec(kept) for g in self.groups]


class Server(Strict):
    """The server's hardware: its own work (FedDU's steps on its data, FedAP's pruning) is charged to it on the
    simulated clock."""

    profile: registered("device profile", devices.CATALOG) = "server_a100"
