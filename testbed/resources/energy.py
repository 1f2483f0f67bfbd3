"""Energy on the clock: what each phase of a task costs in joules.

- A phase of a task draws its device's power for that phase over its whole duration: download at down_W (the
  radio receiving, latency included: the radio is up while it waits), compute at train_W, upload at up_W;
  energy_J = (end_s - start_s) * watts. A cut phase costs its part up to the cut.
- With resources.idle_energy, a device that uploaded before its synchronous round closed waits for the round at
  idle_W: an "idle" phase from its upload's end to the round's close (an asynchronous task has nothing to wait for).
- Power does not follow a fluctuating speed: a throttled device draws the same watts for longer (an upper bound:
  real throttling lowers the clock and the power with it).
Totals are sums of these phases: a round's energy_J is the sum of its events' energy_J, and the run's total the
sum of its rounds', so the three tables agree exactly.
"""
from __future__ import annotations

import numpy as np

from testbed.clock import Phase

# Which of a profile's power figures each phase draws (devices/profiles.py POWER_FIELDS).
PHASE_POWER = {"download": "down_W", "compute": "train_W", "upload": "up_W", "idle": "idle_W"}


class PhaseEnergy:
    """Joules of phases, from the fleet's per-device power figures."""

    def __init__(self, power_W: dict[str, np.ndarray]):
        self.watts = {phase: power_W[field] for phase, field in PHASE_POWER.items()}

    def watts_of(self, device: int, phase: str) -> float:
        return float(self.watts[phase][device])

    def of(self, p: Phase) -> float:
        return (p.end_s - p.start_s) * self.watts_of(p.device, p.phase)

    def missing(self, device: int) -> list[str]:
        """The power figures this device's profile lacks (NaN), by field name."""
        return [PHASE_POWER[phase] for phase, w in self.watts.items() if np.isnan(w[device])]


def idle_phase(device: int, ready_s: float, close_s: float) -> Phase | None:
    """The wait of a device whose upload ended at ready_s for its round to close at close_s (None: no wait)."""
    if close_s <= ready_s:
        return None
    return Phase(device, "idle", ready_s, close_s, True, close_s - ready_s)
