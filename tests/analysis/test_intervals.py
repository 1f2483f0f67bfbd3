"""analysis.intervals: each interval worked out by hand and set against scipy.stats computing it its own way."""
import math

import numpy as np
import pytest
from scipy import stats

from analysis.intervals import (HIGHER, LOWER, NO_INTERVAL, RESAMPLES, WITHIN_NOISE, difference_interval,
                                interval_text, mean_interval, ratio_interval, t_quantile, verdict)


def test_the_t_quantile_is_the_two_sided_95_percent_one():
    assert t_quantile(2) == pytest.approx(4.302653, abs=1e-6)   # the tables' t(0.975, 2)
    assert t_quantile(4) == pytest.approx(2.776445, abs=1e-6)
    assert t_quantile(1e9) == pytest.approx(1.959964, abs=1e-6)  # the normal's, with many seeds


def test_the_mean_interval_by_hand_and_by_scipy():
    """0.80, 0.82, 0.81: mean 0.81, sample std 0.01, so 0.81 ± 4.302653 * 0.01 / sqrt(3) = 0.81 ± 0.024841."""
    n, mean, low, high = mean_interval([0.80, 0.82, 0.81])
    assert n == 3 and mean == pytest.approx(0.81)
    assert (low, high) == pytest.approx((0.81 - 0.024841, 0.81 + 0.024841), abs=1e-6)
    values = [18.1, 21.3, 15.0, 19.9, 17.2]
    expected = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert mean_interval(values)[2:] == pytest.approx(expected)


def test_seeds_without_a_value_are_left_out_and_one_seed_has_no_interval():
    assert mean_interval([0.80, math.nan, 0.82, 0.81]) == pytest.approx(mean_interval([0.80, 0.82, 0.81]))
    n, mean, low, high = mean_interval([52.5, math.nan])
    assert (n, mean) == (1, 52.5) and math.isnan(low) and math.isnan(high)   # never a made-up interval
    n, mean, _, _ = mean_interval([math.nan])
    assert n == 0 and math.isnan(mean)


def test_the_difference_interval_is_welchs_by_hand_and_by_scipy():
    """0.90, 0.91, 0.92 against 0.80, 0.82, 0.81: d = 0.10; each s²/n = 0.0001/3, so se = sqrt(0.0002/3) =
    0.0081650 and Welch's degrees of freedom (2a)² / (2a² / 2) = 4: 0.10 ± 2.776445 * 0.0081650 = 0.10 ± 0.022670."""
    d, low, high = difference_interval([0.90, 0.91, 0.92], [0.80, 0.82, 0.81])
    assert d == pytest.approx(0.10)
    assert (low, high) == pytest.approx((0.10 - 0.022670, 0.10 + 0.022670), abs=1e-6)
    group, baseline = [7.2, 6.1, 8.4, 5.9], [18.1, 21.3, 15.0]   # unequal sizes and spreads
    expected = stats.ttest_ind(group, baseline, equal_var=False).confidence_interval(0.95)
    assert difference_interval(group, baseline)[1:] == pytest.approx((expected.low, expected.high))


def test_a_difference_of_seeds_all_alike_is_exact_and_one_seed_gives_none():
    assert difference_interval([43.5, 43.5], [40.0, 40.0]) == (3.5, 3.5, 3.5)   # se = 0: no 0/0 degrees of freedom
    d, low, high = difference_interval([0.575], [0.80, 0.82])
    assert d == pytest.approx(-0.235) and math.isnan(low) and math.isnan(high)


def test_the_bootstrap_of_a_ratio_of_two_seeds_each_by_hand():
    """Two seeds each: a resampled mean is the lower value, the midpoint or the higher one (1/4, 1/2, 1/4), so
    the lowest ratio, 2 / 2, has chance 1/16 > 2.5% and the 2.5th percentile is it; the 97.5th, 4 / 1."""
    ratio, low, high = ratio_interval([2.0, 4.0], [1.0, 2.0])
    assert ratio == pytest.approx(3.0 / 1.5) and (low, high) == (1.0, 4.0)


def test_the_bootstrap_is_deterministic_and_agrees_with_scipys():
    base, group = [30.0, 32.0, 31.0, 35.0, 29.0], [10.0, 11.0, 12.0, 14.0, 9.5]
    first = ratio_interval(base, group)
    assert ratio_interval(base, group) == first   # seeded: the same values give the same interval, bit for bit
    assert first[0] == pytest.approx(np.mean(base) / np.mean(group))
    theirs = stats.bootstrap((base, group), lambda b, g, axis: np.mean(b, axis=axis) / np.mean(g, axis=axis),
                             n_resamples=RESAMPLES, method="percentile", confidence_level=0.95, random_state=1)
    # another generator's 10,000 resamples: the same interval to within its Monte Carlo error
    assert first[1:] == pytest.approx((theirs.confidence_interval.low, theirs.confidence_interval.high), rel=0.01)


def test_the_bootstrap_needs_two_seeds_a_side():
    ratio, low, high = ratio_interval([30.0, 32.0], [10.0])
    assert ratio == pytest.approx(3.1) and math.isnan(low) and math.isnan(high)


def test_verdicts_of_differences_and_of_ratios():
    assert verdict(0.077, 0.123) == HIGHER
    assert verdict(-0.123, -0.077) == LOWER
    assert verdict(-0.02, 0.05) == WITHIN_NOISE and verdict(0.0, 0.05) == WITHIN_NOISE   # holds 0: no difference
    assert verdict(1.2, 3.4, null=1.0) == HIGHER and verdict(0.8, 1.3, null=1.0) == WITHIN_NOISE
    assert verdict(0.3, 0.9, null=1.0) == LOWER
    assert verdict(math.nan, math.nan) == NO_INTERVAL


def test_interval_text():
    assert interval_text(0.81, 0.785159, 0.834841, 3) == "0.810 [0.785, 0.835]"
    assert interval_text(52.5, math.nan, math.nan, 1) == "52.5 (n=1)"
    assert interval_text(math.nan, math.nan, math.nan, 1) == "-"
