"""The fleet's section of the scenario schema: the user's device catalog files, device groups (a profile, built-in
or from those files, overrides of its figures, availability, capability tiers, and optionally a battery and
fluctuating speed and bandwidth) and the server's hardware."""
from __future__ import annotations

import os
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import (AfterValidator, Field, NonNegativeFloat, PositiveFloat, PositiveInt, PrivateAttr,
                      ValidationInfo, field_validator, model_validator)

import devices
from testbed.schema.availability import AlwaysOn, Availability
from testbed.schema.common import Capability, Strict, existing_file
from testbed.schema.resources import Battery, Rate

if TYPE_CHECKING:  # read where a catalog file is given (devices.load_device_catalog), not with the schema
    from devices.catalog_file import DeviceCatalog


MB = 2**20
PROFILE_OVERRIDES = ("peak_flops", "efficiency", "up_Bps", "down_Bps", "latency_s",
                     "train_W", "up_W", "down_W", "idle_W", "sparse_efficiency")
# The validation context's key under which the fleet hands its catalog files' profiles to the groups naming them
# (pydantic shows a field's validators only its own model's data; the context is the scenario's, one a validation).
FILE_PROFILES = "device_profiles_from_files"


def _known_profile(name: str, info: ValidationInfo) -> str:
    files = (info.context or {}).get(FILE_PROFILES, {})
    if name not in devices.CATALOG and name not in files:
        yours = f"; or one of fleet.catalog's: {', '.join(files)}" if files else ""
        raise ValueError(f"unknown device profile '{name}'; choose one of: {', '.join(sorted(devices.CATALOG))}"
                         f"{yours}")
    return name


# A built-in profile's name, or one of the scenario's catalog files' (validated after fleet.catalog)
ProfileName = Annotated[str, AfterValidator(_known_profile)]


class CatalogFile(Strict):
    """A user's device catalog file (layout: devices/catalog_file.py), relative to the scenario file. The resolved
    scenario records its SHA-256, so --resume or a sweep over a run made with other contents of the file is
    refused as another scenario; given, sha256 pins the contents."""

    file: Path
    sha256: str | None = None   # the file's SHA-256 once validated; given, the digest the file must have
    _catalog: DeviceCatalog = PrivateAttr()

    @model_validator(mode="before")
    @classmethod
    def _a_path_alone(cls, data):
        return {"file": data} if isinstance(data, (str, PurePath)) else data

    @field_validator("file")
    @classmethod
    def _exists(cls, path: Path, info: ValidationInfo) -> Path:
        return existing_file(path, info, "device catalog file")

    @model_validator(mode="after")
    def _read(self):
        try:
            catalog = devices.load_device_catalog(self.file)
        except OSError as err:
            raise ValueError(f"{self.file}: unreadable ({err.strerror})") from None
        if self.sha256 is not None and self.sha256 != catalog.sha256:
            raise ValueError(f"{self.file} no longer has the contents sha256 pins (its digest is now "
                             f"{catalog.sha256}); restore the file, or remove sha256 to use it as it is")
        self._catalog = catalog
        object.__setattr__(self, "sha256", catalog.sha256)  # frozen: filled in once, as DeviceProfile's numbers
        return self

    @property
    def profiles(self) -> dict[str, devices.DeviceProfile]:
        return self._catalog.profiles


class DeviceGroup(Strict):
    profile: ProfileName
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
    # sparse kernels' share of the dense rate (compute: latency); left out of the resolved scenario where not given,
    # so that the run folders and checkpoints of earlier scenarios read as the same scenario
    sparse_efficiency: Capability | None = Field(None, exclude_if=lambda e: e is None)
    # Resource processes, each off unless given:
    battery: Battery | None = None
    speed: Rate | None = None                   # scales the group's FLOP/s over time
    bandwidth: Rate | None = None               # scales its uplink and downlink rates over time

    @model_validator(mode="after")
    def _resample_needs_tiers(self):
        if self.resample_tiers_each_round and not self.tiers:
            raise ValueError("resample_tiers_each_round needs tiers: list the capability levels to draw from")
        return self

    def spec(self, tiers_kept: int | None = None, profiles: dict = devices.CATALOG):
        """The group as devices build it; tiers_kept: only the first so many of its tiers (fleet.heterogeneity);
        profiles: where its profile's name is (the fleet's: built-ins and catalog files')."""
        overrides = {k: getattr(self, k) for k in PROFILE_OVERRIDES if getattr(self, k) is not None}
        if self.memory_MB is not None:
            overrides["memory_bytes"] = self.memory_MB * MB
        profile = profiles[self.profile].with_overrides(**overrides)
        return devices.GroupSpec(profile, self.count, self.availability.model(),
                                 tuple(self.tiers[:tiers_kept]) if self.tiers else None,
                                 self.resample_tiers_each_round, self.battery and self.battery.spec(),
                                 self.speed and self.speed.model(), self.bandwidth and self.bandwidth.model())


# fleet.heterogeneity: how many of each tiered group's tiers are kept, from the first (FedLPS: 2, 3 or all 5)
HETEROGENEITY_TIERS = {"low": 2, "medium": 3, "high": None}
MIN_TIERS_FOR_LEVELS = 4  # fewer, and two of low / medium / high would be the same fleet
# Fleet.build's memory a device, measured with benchmarks/fleet_build.py --fleet-only N (the build of scale.yaml's
# Markov groups, the process's peak RSS): 308,488 KB at 100,000 devices and 634,808 KB at 1,000,000 (0.29 and
# 0.60 GB in benchmarks/RESULTS.md), so 326,320 KB for 900,000 devices: 371 bytes each. A fleet is refused where
# building it would take more than half the machine's physical memory: the run's other per-device arrays (the
# partition, devices.csv, the engine's) need room too, and a build that runs out of memory ends in a MemoryError
# or the kernel's OOM killer, not in a line that names the count.
BUILD_BYTES_PER_DEVICE = 371


def physical_memory() -> int | None:
    """The machine's physical memory in bytes; None where the system does not say (sysconf is POSIX's)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


class Fleet(Strict):
    # The user's device catalog files (one path or a list), declared before the groups that name their profiles;
    # left out of the resolved scenario where there is none: a scenario without catalogs resolves without the key.
    catalog: list[CatalogFile] = Field(default_factory=list, exclude_if=lambda files: not files)
    groups: list[DeviceGroup] = Field(min_length=1)
    heterogeneity: Literal["low", "medium", "high"] | None = None   # the tiered groups' first 2, 3 or all tiers

    @field_validator("catalog", mode="before")
    @classmethod
    def _one_file_alone(cls, files):
        return [files] if isinstance(files, (str, PurePath)) else files

    @field_validator("catalog")
    @classmethod
    def _profiles_for_the_groups(cls, files: list[CatalogFile], info: ValidationInfo) -> list[CatalogFile]:
        seen: dict[str, Path] = {}
        for catalog in files:
            for name in catalog.profiles:
                if name in seen:
                    raise ValueError(f"{seen[name]} and {catalog.file} both have a profile '{name}'; rename one "
                                     "of them")
                seen[name] = catalog.file
        if isinstance(info.context, dict):
            info.context[FILE_PROFILES] = seen
        return files

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

    @model_validator(mode="after")
    def _fits_memory(self):
        memory = physical_memory()
        limit = memory // 2 // BUILD_BYTES_PER_DEVICE if memory else None
        if limit is not None and self.size > limit:
            raise ValueError(f"{self.size:,} devices are more than this machine can build: at most {limit:,} "
                             f"({BUILD_BYTES_PER_DEVICE} bytes a device, in half its {memory / 2**30:.1f} GiB of "
                             "memory); lower the groups' counts")
        return self

    @property
    def size(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def profiles(self) -> dict[str, devices.DeviceProfile]:
        """Every profile the groups may name: the built-ins and the catalog files'."""
        return {**devices.CATALOG, **{name: p for catalog in self.catalog for name, p in catalog.profiles.items()}}

    def specs(self) -> list:
        """Every group as devices build it, tiers cut to the heterogeneity level."""
        kept = HETEROGENEITY_TIERS[self.heterogeneity] if self.heterogeneity else None
        profiles = self.profiles
        return [g.spec(kept, profiles) for g in self.groups]


class Server(Strict):
    """The server's hardware: its own work (FedDU's steps on its data, FedAP's pruning) is charged to it on the
    simulated clock."""

    profile: ProfileName = "server_a100"   # a built-in profile or one of fleet.catalog's files'

