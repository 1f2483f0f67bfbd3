"""Device resources beyond FLOP/s and links, as every protocol asks for them: energy, batteries, memory limits
and fluctuating rates. Each is off unless the scenario turns it on; with all off, a run's tables are exactly
those of a testbed without them.

- Who may train at t: online (availability), fitting its task in memory (memory_limits.py) and, with a battery,
  at or above its minimum level (devices/battery.py). Devices online but excluded are counted per round.
- A task's timeline integrates fluctuating rates (timing.py); its device goes offline at the end of its
  on-interval or when its battery empties under the task's load, whichever comes first.
- Each phase costs energy (energy.py); when the task ends, its phases drain the device's battery.
"""
from __future__ import annotations

import math

import numpy as np

from testbed.errors import TestbedError
from testbed.clock import PHASES, Phase
from testbed.resources.energy import PhaseEnergy, idle_phase
from testbed.resources.memory_limits import MB, MemoryLimits

__all__ = ["Resources", "idle_phase"]


class Resources:
    def __init__(self, exp):
        cfg, fleet = exp.scenario, exp.fleet
        self.fleet = fleet
        self.energy = PhaseEnergy(fleet.power_W) if cfg.energy_on else None
        self.idle_energy = cfg.resources.idle_energy
        self.batteries = fleet.batteries
        # which devices run on a battery, read once: the per-task queries below would copy it every time
        self.on_battery = None if self.batteries is None else self.batteries.has_battery()
        if self.energy is not None:
            self._check_power_figures()
        self.memory = MemoryLimits(exp) if cfg.memory_on else None
        self.varying = fleet.speed is not None or fleet.bandwidth is not None

    def _check_power_figures(self) -> None:
        for group in range(len(self.fleet.groups)):
            first = int(np.flatnonzero(self.fleet.group == group)[0])
            missing = self.energy.missing(first)
            if missing and not (missing == ["idle_W"] and not self.idle_energy):
                raise TestbedError(f"fleet.groups.{group}.{missing[0]}: profile {self.fleet.profile_name[first]} has "
                                   f"no {missing[0]} figure and energy is accounted; set it for this group")

    @property
    def ratio_cap(self) -> np.ndarray | None:
        """(n,) the largest submodel ratio each device can hold in memory; None: no cap."""
        return None if self.memory is None else self.memory.ratio_cap

    # ---- who may train ------------------------------------------------------------------------------
    def usable(self, online: np.ndarray, t: float) -> np.ndarray:
        """(n,) bool: online at t, fitting in memory and with battery enough to start."""
        allowed = self.allowed(t)
        return online.copy() if allowed is None else online & allowed

    def allowed(self, t: float) -> np.ndarray | None:
        """(n,) bool: fitting in memory and with battery enough to start at t; None where neither is modelled (every
        device is), so that a protocol's hot path need not build an all-True array."""
        if not self.restricts:
            return None
        allowed = np.ones(self.fleet.n, dtype=bool)
        if self.memory is not None:
            allowed &= self.memory.fits
        if self.batteries is not None:
            allowed &= self.batteries.eligible(t)
        return allowed

    @property
    def restricts(self) -> bool:
        """Whether memory or batteries keep some online devices out: without either, online is usable."""
        return self.memory is not None or self.batteries is not None

    def excluded(self, online: np.ndarray, t: float) -> dict[str, int]:
        """How many online devices memory and battery keep out at t (a device both keep out counts for memory)."""
        counts = {}
        if self.memory is not None:
            counts["excluded_memory"] = int((online & ~self.memory.fits).sum())
            online = online & self.memory.fits
        if self.batteries is not None:
            counts["excluded_battery"] = int((online & ~self.batteries.eligible(t)).sum())
        return counts

    def next_usable(self, t: float, next_online: np.ndarray) -> np.ndarray:
        """(n,) a lower bound on when each device may next be usable, given when each is next online (inf: never):
        waking there and asking again makes progress."""
        wake = next_online.copy()
        if self.memory is not None:
            wake[~self.memory.fits] = math.inf
        if self.batteries is not None:
            wake = np.maximum(wake, self.batteries.next_eligible(t))
        return wake

    # ---- a task on the clock ----------------------------------------------------------------------------
    def offline_at(self, device: int, t0: float, seconds: tuple[float, float, float],
                   online_until: float) -> tuple[float, bool]:
        """When the task dispatched at t0 with these phase durations loses its device, and whether that is its
        battery emptying (before its on-interval ends)."""
        if self.on_battery is None or not self.on_battery[device]:
            return online_until, False
        load, start = [], t0
        for phase, duration in zip(PHASES, seconds):
            load.append((start, start + duration, self.energy.watts_of(device, phase)))
            start += duration
        empty = self.batteries.empty_at(device, t0, load)
        return (empty, True) if empty < online_until else (online_until, False)

    def drain_all(self, phases: list[Phase]) -> None:
        """drain for every device among these phases (a round's), each with its own, in order."""
        if self.on_battery is None:
            return
        by_device: dict[int, list[Phase]] = {}
        for p in phases:
            by_device.setdefault(p.device, []).append(p)
        for device, own in by_device.items():
            self.drain(device, own)

    def drain(self, device: int, phases: list[Phase]) -> None:
        """The task's phases (its idle wait included) drain the device's battery, up to the last one's end."""
        if self.on_battery is not None and phases and self.on_battery[device]:
            load = [(p.start_s, p.end_s, self.energy.watts_of(device, p.phase)) for p in phases]
            self.batteries.settle(device, phases[-1].end_s, load)

    def joules(self, p: Phase) -> float:
        return self.energy.of(p)

    # ---- tables and checkpoints ----------------------------------------------------------------------
    def battery_rows(self, r: int, t: float) -> list[dict]:
        """battery.csv's rows at the end of round r: each group's battery levels (fractions of capacity; a device
        with a task still in flight, in an asynchronous run, shows its level before that task)."""
        if self.batteries is None:
            return []
        levels, eligible, rows = self.batteries.levels_at(t), self.batteries.eligible(t), []
        for group, spec in enumerate(self.fleet.groups):
            members = self.fleet.group == group
            if spec.battery is None:
                continue
            mine = levels[members]
            rows.append({"round": r, "t_s": t, "group": group, "profile": spec.profile.name,
                         "level_mean": float(mine.mean()), "level_min": float(mine.min()),
                         "level_max": float(mine.max()), "below_min": int((~eligible[members]).sum())})
        return rows

    def facts(self) -> dict:
        """For summary.json, with memory limits: the full task's footprint, and how many devices cannot hold it
        (never selected) or hold only a submodel."""
        if self.memory is None:
            return {}
        limits = self.memory
        capped = int((limits.ratio_cap < 1).sum() - (~limits.fits).sum()) if limits.ratio_cap is not None else 0
        return {"memory_footprint_MB": limits.footprint.total / MB, "memory_unfit_devices": int((~limits.fits).sum()),
                "memory_capped_devices": capped}

    def state(self) -> dict:
        return {} if self.batteries is None else {"batteries": self.batteries.state()}

    def restore(self, state: dict) -> None:
        if self.batteries is not None:
            self.batteries.restore(state["batteries"])
