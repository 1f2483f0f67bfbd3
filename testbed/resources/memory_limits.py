"""Memory limits: which devices can hold their training task, and how big a submodel each can hold.

- A device can train where its RAM for training (profile memory_bytes, or the group's memory_MB) is at least the
  task's footprint (testbed/memory.py: parameters, gradients, the local optimizer's state, activations at the
  batch size, backward's largest activation gradient), computed once per run from the model and the algorithm's
  local optimizer.
- Submodel methods (a strategy with a ratio policy: FedLPS, HeteroFL, FjORD, FedRolex, eFD, FedMP) give each
  device a ratio; a device trains at most the largest ratio on a 1/64 grid whose footprint fits (its cap, 1 where
  the full model fits), so the ratio policies feel the memory. A device where not even 1/64 fits cannot train.
- Devices that cannot train are never selected; a fleet where none can ends the run before it starts.
"""
from __future__ import annotations

import numpy as np

from testbed.errors import TestbedError
from testbed.memory import TrainingMemory

MB = 2**20
RATIO_GRID = 64  # submodel caps are multiples of 1/64


class MemoryLimits:
    def __init__(self, exp):
        fleet, strategy = exp.fleet, exp.strategy
        self.memory = TrainingMemory(exp.model, exp.dataset.train_x[:1], strategy.client)
        self.footprint = self.memory.footprint(1.0)
        available = fleet.memory_bytes
        for d in np.flatnonzero(np.isnan(available))[:1]:
            group = int(fleet.group[d])
            raise TestbedError(f"fleet.groups.{group}.memory_MB: profile {fleet.profile_name[d]} has no memory "
                               "figure and memory limits are on; set memory_MB for this group")
        self.submodels = hasattr(strategy, "ratios")
        if self.submodels:
            caps = {m: self.memory.max_fitting_ratio(m, RATIO_GRID) for m in np.unique(available)}
            cap = np.array([np.nan if caps[m] is None else caps[m] for m in available])
            self.fits = ~np.isnan(cap)
            self.ratio_cap = np.where(self.fits, cap, 0.0)
            smallest_need = self.memory.footprint(1 / RATIO_GRID).total
        else:
            self.fits = available >= self.footprint.total
            self.ratio_cap = None
            smallest_need = self.footprint.total
        if not self.fits.any():
            small, large = int(np.argmin(available)), int(np.argmax(available))
            what = "its smallest submodel (ratio 1/64)" if self.submodels else "one training task"
            raise TestbedError(
                f"fleet: no device has the memory for {what}: it needs {smallest_need / MB:.1f} MB "
                f"({exp.scenario.model.name}, batch {strategy.client.batch_size}, {type(strategy.client).__name__}); "
                f"the smallest device ({fleet.profile_name[small]}, fleet.groups.{int(fleet.group[small])}) has "
                f"{available[small] / MB:.1f} MB, the largest {available[large] / MB:.1f} MB; raise memory_MB, "
                "lower client.batch_size or use a smaller model")
