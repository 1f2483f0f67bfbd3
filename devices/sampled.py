"""What the per-device processes drawn from a seed share (availability, fluctuating rates): devices in groups of
one model each, group g drawing from child_seed(seed, g) over [0, horizon_s), and a horizon that doubles when a
query reaches it. Every model's draws are prefix-stable (a longer horizon only appends), so extending the
horizon changes no answer already given."""
import math
from typing import Sequence

import numpy as np

from .seeding import child_seed


class GroupSampled:
    """Base of Availability and Rates: subclasses store a flat sample with per-device `_offsets` in `_sample`."""

    def __init__(self, groups: Sequence[tuple[object, int]], seed: np.random.SeedSequence, initial_horizon_s: float):
        if not (math.isfinite(initial_horizon_s) and initial_horizon_s > 0):
            raise ValueError(f"initial_horizon_s must be a finite number > 0, got {initial_horizon_s!r}")
        self._groups = tuple((model, int(count)) for model, count in groups)
        self._seed = seed
        self._sample(float(initial_horizon_s))

    @property
    def n(self) -> int:
        return len(self._offsets) - 1

    @property
    def horizon_s(self) -> float:
        return self._horizon_s

    def _draws(self, horizon_s: float) -> list:
        """Every device's sample over [0, horizon_s), group after group."""
        per_device = []
        for group_index, (model, count) in enumerate(self._groups):
            per_device += model.sample(child_seed(self._seed, group_index), count, horizon_s)
        return per_device

    def _extend_past(self, t: float) -> None:
        """Sample past t, doubling the horizon: one re-sample, however far t lies."""
        horizon_s = self._horizon_s
        while horizon_s <= t:
            horizon_s *= 2
        if horizon_s != self._horizon_s:
            self._sample(horizon_s)

    def _sample(self, horizon_s: float) -> None:
        raise NotImplementedError
