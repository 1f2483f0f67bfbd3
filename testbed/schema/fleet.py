"""The fleet's section of the scenario schema: device groups (a catalog profile, overrides of its figures,
availability, capability tiers, and optionally a battery and fluctuating speed and bandwidth) and the server's
hardware."""
from __future__ import annotations

from typing import Literal

from pydantic import (Field, NonNegativeFloat, PositiveFloat, PositiveInt, ValidationInfo, field_validator,
                      model_validator)

import devices
from testbed.schema.availability import AlwaysOn, Availability
from testbed.schema.common import Capability, Strict, registered
from testbed.schema.resources import Battery, Rate


MB = 2**20
PROFILE_OVERRIDES = ("peak_flops", "efficiency", "up_Bps", "down_Bps", "latency_s",
                     "train_W", "up_W", "down_W", "idle_W")


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
    train_W: NonNegativeFloat | None = None     # watts while training, sending, receiving, idle
    up_W: NonNegativeFloat | None = None
    down_W: NonNegativeFloat | None = None
    idle_W: NonNegativeFloat | None = None
    memory_MB: PositiveFloat | None = None      # RAM a training process may use; MB = 2**20 bytes, as RAM is quoted
    # Resource processes, each off unless given:
    battery: Battery | None = None
    speed: Rate | None = None                   # scales the group's FLOP/s over time
    bandwidth: Rate | None = None               # scales its uplink and downlink rates over time

    @model_validator(mode="after")
    def _resample_needs_tiers(self):
        if self.resample_tiers_each_round and not self.tiers:
            raise ValueError("resample_tiers_each_round needs tiers: list the capability levels to draw from")
        return self

    def spec(self, tiers_kept: int | None = None):
        """The group as devices build it; tiers_kept: only the first so many of its tiers (fleet.heterogeneity)."""
        overrides = {k: getattr(self, k) for k in PROFILE_OVERRIDES if getattr(self, k) is not None}
        if self.memory_MB is not None:
            overrides["memory_bytes"] = self.memory_MB * MB
        profile = devices.get_profile(self.profile).with_overrides(**overrides)
        return devices.GroupSpec(profile, self.count, self.availability.model(),
                                 tuple(self.tiers[:tiers_kept]) if self.tiers else None,
                                 self.resample_tiers_each_round, self.battery and self.battery.spec(),
                                 self.speed and self.speed.model(), self.bandwidth and self.bandwidth.model())


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
