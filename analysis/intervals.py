"""Two-sided 95% confidence intervals over seeds, and the verdict they give against a baseline.

Each seed of a group is one observation (a run's final accuracy, its time to a target); NaN values (a seed that
never reached the target) are left out, so n counts the seeds that gave a value.

- mean_interval: the mean of n >= 2 values and Student's t interval, mean ± t(0.975, n - 1) * s / sqrt(n), with
  s the sample standard deviation (ddof=1); scipy.stats.t.interval(0.95, n - 1, mean, s / sqrt(n)) gives the same.
- difference_interval: a group's mean minus the baseline's (each n >= 2), with Welch's interval (unequal
  variances, the seeds of the two groups taken as independent): d ± t(0.975, v) * se, se = sqrt(s1²/n1 + s2²/n2)
  and v the Welch-Satterthwaite degrees of freedom; scipy.stats.ttest_ind(group, baseline, equal_var=False)
  .confidence_interval(0.95) gives the same. Where both groups' values are all alike (se = 0) the difference is
  exact: the interval is [d, d].
- ratio_interval: the ratio of two means, mean(numerator) / mean(denominator) (the speedup: the baseline's mean
  time over the group's), with a percentile bootstrap over seeds: RESAMPLES times, each group's seeds drawn with
  replacement (as many as it has, the two groups independently), the ratio of the resampled means; the interval
  is the 2.5th and 97.5th percentile of those ratios (numpy's linear interpolation). The generator is
  numpy.random.default_rng(BOOTSTRAP_SEED), a new one for each interval: the same values give the same interval,
  whatever else is computed. Like any percentile bootstrap it is too narrow with few seeds (three seeds have ten
  distinct resampled means): the t interval of the time itself is the cautious verdict there.
- verdict: "higher" where the interval of a difference lies above 0 (of a ratio: above 1), "lower" where below,
  "within noise" where it holds 0 (1); NO_INTERVAL ("n=1") where a side has fewer than two values: one seed has
  no spread to make an interval of, and none is made up.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

LEVEL = 0.95
RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
NO_INTERVAL = "n=1"  # the verdict, and the interval's text, where a side has fewer than two values
HIGHER, LOWER, WITHIN_NOISE = "higher", "lower", "within noise"


def _values(values) -> np.ndarray:
    array = np.asarray(values, dtype="float64")
    return array[~np.isnan(array)]


def t_quantile(df: float) -> float:
    """The two-sided 95% quantile of Student's t with df degrees of freedom, t(0.975, df)."""
    return float(stats.t.ppf(0.5 + LEVEL / 2, df))


def mean_interval(values) -> tuple[int, float, float, float]:
    """(n, mean, low, high) of the values that are not NaN: Student's t interval of their mean; low and high NaN
    where n < 2 (the mean NaN where n = 0)."""
    x = _values(values)
    n = len(x)
    mean = float(x.mean()) if n else math.nan
    if n < 2:
        return n, mean, math.nan, math.nan
    half = t_quantile(n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    return n, mean, mean - half, mean + half


def difference_interval(values, baseline) -> tuple[float, float, float]:
    """(d, low, high): the mean of values minus the mean of baseline (NaN left out of each), with Welch's
    interval; low and high NaN where either side has fewer than two values."""
    x, y = _values(values), _values(baseline)
    if not len(x) or not len(y):
        return math.nan, math.nan, math.nan
    d = float(x.mean() - y.mean())
    if len(x) < 2 or len(y) < 2:
        return d, math.nan, math.nan
    a, b = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    se = math.sqrt(a + b)
    if se == 0:  # every seed of both alike: nothing to be uncertain about (and 0/0 degrees of freedom)
        return d, d, d
    df = (a + b) ** 2 / (a ** 2 / (len(x) - 1) + b ** 2 / (len(y) - 1))
    half = t_quantile(df) * se
    return d, d - half, d + half


def ratio_interval(numerator, denominator) -> tuple[float, float, float]:
    """(r, low, high): r = mean(numerator) / mean(denominator) (NaN left out of each), with the percentile
    bootstrap of the module docstring; low and high NaN where either side has fewer than two values."""
    x, y = _values(numerator), _values(denominator)
    if not len(x) or not len(y):
        return math.nan, math.nan, math.nan
    ratio = float(x.mean() / y.mean())
    if len(x) < 2 or len(y) < 2:
        return ratio, math.nan, math.nan
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    top = rng.choice(x, size=(RESAMPLES, len(x))).mean(axis=1)  # numerator first, then denominator: fixed order
    bottom = rng.choice(y, size=(RESAMPLES, len(y))).mean(axis=1)
    low, high = np.percentile(top / bottom, [50 * (1 - LEVEL), 50 * (1 + LEVEL)])
    return ratio, float(low), float(high)


def verdict(low: float, high: float, null: float = 0.0) -> str:
    """HIGHER where [low, high] lies above `null` (0 for a difference, 1 for a ratio), LOWER where below,
    WITHIN_NOISE where it holds it; NO_INTERVAL where there is no interval (NaN)."""
    if math.isnan(low) or math.isnan(high):
        return NO_INTERVAL
    return HIGHER if low > null else LOWER if high < null else WITHIN_NOISE


def interval_text(mean: float, low: float, high: float, decimals: int) -> str:
    """"0.812 [0.790, 0.834]"; the mean and "(n=1)" where there is no interval; "-" where there is no mean."""
    if math.isnan(mean):
        return "-"
    if math.isnan(low):
        return f"{mean:.{decimals}f} ({NO_INTERVAL})"
    return f"{mean:.{decimals}f} [{low:.{decimals}f}, {high:.{decimals}f}]"
