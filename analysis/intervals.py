"""Two-sided 95% confidence intervals over seeds, and the verdict they give against a baseline.

Each seed of a group is one observation (a run's final accuracy, its time to a target); NaN values (a seed that
never reached the target) are left out, so n counts the seeds that gave a value. Every statistic is made on the
metric's scale (analysis.scales: log for costs, logit for accuracies, the values themselves for amounts) and taken
back, so one model answers each question, whichever way it is read:

- mean_interval: the mean on the scale of n >= MIN_SEEDS values and Student's t interval there, m ± t(0.975, n - 1)
  * s / sqrt(n) (s: the sample standard deviation, ddof=1), taken back: for LINEAR exactly scipy.stats.t.interval;
  for LOG the geometric mean and its interval, for LOGIT the accuracy at the mean log-odds and its interval; an
  AMOUNT's interval is cut at 0.
- effect_interval: the group against the baseline (the two groups' seeds independent), with Welch's interval
  (unequal variances): e ± t(0.975, v) * se, se = sqrt(se1² + se2²), v the Welch-Satterthwaite degrees of freedom
  (se1^4 / (n1 - 1) + se2^4 / (n2 - 1) in its denominator). On a ratio scale (LOG) e is the difference of the means
  on the scale, se_i = s_i / sqrt(n_i) there, and e and its bounds are taken back by exp: the ratio of the geometric
  means. Otherwise e is the difference of the means taken back, and se_i = slope(m_i) * s_i / sqrt(n_i), each
  side's standard error taken back by the slope of the way back (the delta method; for LINEAR and AMOUNT the slope
  is 1, and the interval exactly scipy.stats.ttest_ind(group, baseline, equal_var=False).confidence_interval(0.95));
  the interval is kept within the scale's bound (an accuracy's difference within [-1, 1]). Where every value of both
  sides is alike (se = 0), the effect is exact: [e, e].
- ratio_interval(numerator, denominator): effect_interval on the LOG scale, the ratio of the geometric means with
  its interval. A speed-up is ratio_interval(baseline's times, group's times) and the time's own effect is
  ratio_interval(group's, baseline's): Welch's interval is antisymmetric, so the one is exactly the reciprocal of
  the other, interval and all, and their verdicts cannot disagree.
- verdict: HIGHER where the effect's interval lies above the scale's null (0 for a difference, 1 for a ratio), LOWER
  where below, WITHIN_NOISE where it holds it; TOO_FEW where a side has fewer than MIN_SEEDS values: Student's t
  and Welch's interval need a standard deviation, which one seed does not have, and none is made up.

The *_intervals functions do the same on many samples at once (rows of a 2-D array, no NaN): the coverage tests
draw thousands of samples through them, and the functions above are them on one row.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from analysis.scales import LINEAR, LOG, Scale

LEVEL = 0.95
MIN_SEEDS = 2  # a side's least seeds with a value for any interval: one has no standard deviation
HIGHER, LOWER, WITHIN_NOISE = "higher", "lower", "within noise"
TOO_FEW = "too few seeds"  # the verdict where a side has fewer than MIN_SEEDS values


def _values(values) -> np.ndarray:
    array = np.asarray(values, dtype="float64")
    return array[~np.isnan(array)]


def t_quantile(df):
    """The two-sided 95% quantile of Student's t with df degrees of freedom, t(0.975, df) (arrays elementwise)."""
    quantile = stats.t.ppf(0.5 + LEVEL / 2, df)
    return float(quantile) if np.ndim(quantile) == 0 else quantile


def mean_intervals(samples: np.ndarray, scale: Scale = LINEAR) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(center, low, high) of each row of `samples` (draws x n, no NaN, n >= MIN_SEEDS), as mean_interval."""
    samples = np.asarray(samples, dtype="float64")
    x = scale.forward(samples)
    n = x.shape[-1]
    m = x.mean(axis=-1)
    half = t_quantile(n - 1) * x.std(axis=-1, ddof=1) / math.sqrt(n)
    center, low, high = scale.back(m), scale.back(m - half), scale.back(m + half)
    # all alike: the value itself (a clamped accuracy of 1.0 would read 0.9999 taken back)
    alike = np.ptp(samples, axis=-1) == 0
    center, low, high = (np.where(alike, samples[..., 0], v) for v in (center, low, high))
    return center, np.maximum(low, scale.low), high


def effect_intervals(samples: np.ndarray, baseline: np.ndarray,
                     scale: Scale = LINEAR) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(effect, low, high) of each row of `samples` against the same row of `baseline` (draws x n1, draws x n2,
    no NaN, each n >= MIN_SEEDS), as effect_interval."""
    x, y = scale.forward(np.asarray(samples, "float64")), scale.forward(np.asarray(baseline, "float64"))
    (m1, a, n1), (m2, b, n2) = _moments(x, scale), _moments(y, scale)
    se = np.sqrt(a + b)
    with np.errstate(invalid="ignore", divide="ignore"):  # se = 0: 0/0 degrees of freedom, and no half-width
        df = (a + b) ** 2 / (a ** 2 / (n1 - 1) + b ** 2 / (n2 - 1))
        half = np.where(se == 0, 0.0, t_quantile(np.where(se == 0, 1.0, df)) * se)
    e = _effect(m1, m2, scale)
    if scale.ratio:  # the half-width is on the log scale
        return e, e * np.exp(-half), e * np.exp(half)
    return e, np.maximum(e - half, -scale.bound), np.minimum(e + half, scale.bound)


def _effect(m1, m2, scale: Scale):
    """The effect of means m1 against m2 on the scale: the ratio of the means taken back, or their difference."""
    return np.exp(m1 - m2) if scale.ratio else scale.back(m1) - scale.back(m2)


def _moments(x: np.ndarray, scale: Scale) -> tuple[np.ndarray, np.ndarray, int]:
    """Each row's mean on the scale, the square of its standard error (taken back by the scale's slope where the
    effect is a difference of the means taken back), and n."""
    n, m = x.shape[-1], x.mean(axis=-1)
    variance = x.var(axis=-1, ddof=1) / n
    return m, variance if scale.ratio else scale.slope(m) ** 2 * variance, n


def mean_interval(values, scale: Scale = LINEAR) -> tuple[int, float, float, float]:
    """(n, center, low, high) of the values that are not NaN, as the module docstring's mean_interval; low and
    high NaN where n < MIN_SEEDS (the center then the one value, NaN where n = 0)."""
    x = _values(values)
    if len(x) < MIN_SEEDS:  # one seed's value is its own mean on any scale
        return len(x), (float(x[0]) if len(x) else math.nan), math.nan, math.nan
    center, low, high = mean_intervals(x[None, :], scale)
    return len(x), float(center[0]), float(low[0]), float(high[0])


def effect_interval(values, baseline, scale: Scale = LINEAR) -> tuple[float, float, float]:
    """(effect, low, high): the values (NaN left out) against the baseline's, as the module docstring's
    effect_interval; low and high NaN where either side has fewer than MIN_SEEDS values, all NaN where either has
    none."""
    x, y = _values(values), _values(baseline)
    if not len(x) or not len(y):
        return math.nan, math.nan, math.nan
    if len(x) < MIN_SEEDS or len(y) < MIN_SEEDS:  # the effect of the means, without an interval
        return float(_effect(scale.forward(x).mean(), scale.forward(y).mean(), scale)), math.nan, math.nan
    effect, low, high = effect_intervals(x[None, :], y[None, :], scale)
    return float(effect[0]), float(low[0]), float(high[0])


def ratio_interval(numerator, denominator) -> tuple[float, float, float]:
    """(r, low, high): the ratio of the geometric means of numerator and denominator (NaN left out of each) with
    its interval, effect_interval on the LOG scale; all NaN where a value is not > 0 (no log)."""
    x, y = _values(numerator), _values(denominator)
    if (x <= 0).any() or (y <= 0).any():
        return math.nan, math.nan, math.nan
    return effect_interval(x, y, LOG)


def verdict(low: float, high: float, null: float = 0.0) -> str:
    """HIGHER where [low, high] lies above `null` (0 for a difference, 1 for a ratio), LOWER where below,
    WITHIN_NOISE where it holds it; TOO_FEW where there is no interval (NaN)."""
    if math.isnan(low) or math.isnan(high):
        return TOO_FEW
    return HIGHER if low > null else LOWER if high < null else WITHIN_NOISE


def interval_text(center: float, low: float, high: float, decimals: int, n: int | None = None) -> str:
    """"0.812 [0.790, 0.834]"; without an interval the center and, given n, "(1 seed; need 2)", else "(too few
    seeds)"; "-" where there is no center."""
    if math.isnan(center):
        return "-"
    if math.isnan(low):
        few = TOO_FEW if n is None else f"{n} seed{'' if n == 1 else 's'}; need {MIN_SEEDS}"
        return f"{center:.{decimals}f} ({few})"
    return f"{center:.{decimals}f} [{low:.{decimals}f}, {high:.{decimals}f}]"
