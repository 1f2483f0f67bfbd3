"""The scale a metric's intervals are made on, so that every interval stays where the metric can be.

A Scale maps a metric's values to the line its statistics are made on (`forward`) and back (`back`), so that a mean
interval made there and taken back keeps the metric's bounds; a group's effect against a baseline is read in the
metric's terms (analysis.intervals makes both):

- LOG, for positive costs (seconds, megabytes, TFLOPs, rounds and joules, to a target or in all): log(x). A mean on
  it taken back is the geometric mean, every interval lies above 0, and the effect is a ratio: the group's
  geometric mean over the baseline's, exp of the difference of the means of the logs (no effect: 1). Costs are
  skewed (a seed that stalls takes far longer, none takes less than nothing), which the log makes near-symmetric,
  and a ratio (a speed-up) is what is asked of them.
- LOGIT, for fractions in [0, 1] (accuracies): log(p / (1 - p)), each value first clamped to [EPSILON,
  1 - EPSILON] (1.0 has no logit). A mean on it taken back is the accuracy at the seeds' mean log-odds, and every
  interval lies inside [0, 1]. The effect is a difference: the group's accuracy so taken back minus the baseline's
  (no effect: 0), each side's standard error taken back by the slope of the way back, p (1 - p) (the delta
  method), and the interval kept inside [-1, 1].
- AMOUNT, for amounts that are never negative but can be 0 (devices kept out, joules wasted, a cost that was 0):
  the values themselves, a mean's interval cut at 0 (the true mean is >= 0, so the cut never makes it miss); the
  effect the difference of the means.
- LINEAR: the values themselves, unbounded; the default where a caller names no scale.

scale_of(metric, values) picks one for compare's and the studies' metrics (every one of them >= 0): LOGIT for a name
holding "accuracy", LOG for a name starting with one of COSTS where every value is > 0, AMOUNT otherwise (a cost with
a 0 cannot go on a log scale).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.special import expit, logit

# Accuracies are clamped this far inside [0, 1] (1.0 and 0.0 have no logit): it moves only those within 1e-4 of a
# bound, by less than one sample of a test set under 10,000 samples.
EPSILON = 1e-4
COSTS = ("time_s", "sim_time_s", "uplink_MB", "TFLOPs", "rounds", "energy_J", "total_")


@dataclass(frozen=True)
class Scale:
    """How a metric's statistics are made: `forward` to the line they are made on, `back` from it and `slope` the
    derivative of `back` (how a standard error there is taken back); `ratio`: the effect is a ratio of the means
    taken back (else their difference); `low` the least value a mean's interval may have, `bound` the largest
    size a difference may have (an accuracy's: 1)."""

    name: str
    forward: Callable[[np.ndarray], np.ndarray]
    back: Callable[[np.ndarray], np.ndarray]
    slope: Callable[[np.ndarray], np.ndarray]
    ratio: bool = False
    low: float = -np.inf
    bound: float = np.inf

    @property
    def null(self) -> float:
        """The effect of no difference: 1 for a ratio, 0 for a difference."""
        return 1.0 if self.ratio else 0.0


def _same(x):
    return x


def _one(x):
    return np.ones_like(x)


def _clamped_logit(p):
    return logit(np.clip(p, EPSILON, 1 - EPSILON))


def _logistic_slope(m):
    p = expit(m)
    return p * (1 - p)


LINEAR = Scale("linear", _same, _same, _one)
AMOUNT = Scale("amount", _same, _same, _one, low=0.0)
LOG = Scale("log", np.log, np.exp, np.exp, ratio=True)
LOGIT = Scale("logit", _clamped_logit, expit, _logistic_slope, bound=1.0)
SCALES = {scale.name: scale for scale in (LINEAR, AMOUNT, LOG, LOGIT)}


def scale_of(metric: str, values) -> Scale:
    """The scale of the module docstring for `metric` with these values (NaN ones left out)."""
    if "accuracy" in metric:
        return LOGIT
    array = np.asarray(values, dtype="float64")
    if metric.startswith(COSTS) and bool((array[~np.isnan(array)] > 0).all()):
        return LOG
    return AMOUNT
