"""Who may take a task at an instant: a part of the kit (kit.py) that every protocol asks the same questions.

Semantics, at simulated time t:
- `online(t)`: (n,) bool, the fleet's availability model at t;
- `allowed(t)`: (n,) bool, fitting a task in memory and with battery enough to start it (testbed/resources/);
  None where neither is modelled, so that a hot path need not build an all-True array;
- `usable(t, online, busy)`: online (the given mask at t), allowed, and not busy: who can take a task;
- `excluded(online, t)` and `census(t)`: how many devices are online and how many of those memory and battery keep
  out (rounds.csv's online and excluded_* columns);
- `next_wake(t, busy)`: where nobody idle is usable at t, a lower bound on when the first may be (online, with
  battery enough): waking there and asking again makes progress; inf where none ever will.
A synchronous round and an asynchronous free slot get the same answers; nothing here changes any state.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np

import devices
from testbed.resources import Resources


class Availability:
    """The fleet's availability and the devices' resources, asked together."""

    def __init__(self, fleet: devices.Fleet, resources: Resources):
        self.fleet, self._resources = fleet, resources

    def online(self, t: float) -> np.ndarray:
        """(n,) bool: the devices online at t."""
        return self.fleet.availability.online_at(t)

    def allowed(self, t: float) -> np.ndarray | None:
        """(n,) bool: fitting a task in memory and with battery enough to start at t; None where neither is
        modelled (every device is)."""
        return self._resources.allowed(t)

    def usable(self, t: float, online: np.ndarray, busy: Iterable[int] = ()) -> np.ndarray:
        """(n,) bool: who can take a task at t: online (`online`, the mask at t), allowed, and not busy."""
        usable = self._resources.usable(online, t)
        usable[list(busy)] = False
        return usable

    def excluded(self, online: np.ndarray, t: float) -> dict[str, int]:
        """How many online devices memory and battery keep out at t: rounds.csv's excluded_* columns."""
        return self._resources.excluded(online, t)

    def census(self, t: float) -> tuple[int, dict[str, int]]:
        """How many devices are online at t, and how many of them memory and battery keep out (`excluded`):
        without either, a count that needs no fleet-wide mask."""
        if not self._resources.restricts:
            return self.fleet.availability.count_online(t), {}
        online = self.online(t)
        return int(online.sum()), self.excluded(online, t)

    def next_wake(self, t: float, busy: Iterable[int] = ()) -> float:
        """Where nobody not busy is usable at t, a lower bound on when the first may be (online, with battery
        enough); inf where none ever will."""
        idle = np.ones(self.fleet.n, dtype=bool)
        idle[list(busy)] = False
        wake = self._resources.next_usable(t, self.fleet.availability.next_online_all(t))
        return float(wake[idle].min(initial=math.inf))
