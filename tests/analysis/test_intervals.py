"""analysis.intervals and analysis.scales: each interval worked out by hand and set against scipy.stats computing it
its own way (on the scale's values: scipy knows no scales)."""
import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, logit

from analysis.intervals import (HIGHER, LOWER, MIN_SEEDS, TOO_FEW, WITHIN_NOISE, effect_interval, interval_text,
                                mean_interval, ratio_interval, t_quantile, verdict)
from analysis.scales import AMOUNT, LINEAR, LOG, LOGIT, scale_of


def test_the_t_quantile_is_the_two_sided_95_percent_one():
    assert t_quantile(2) == pytest.approx(4.302653, abs=1e-6)   # the tables' t(0.975, 2)
    assert t_quantile(4) == pytest.approx(2.776445, abs=1e-6)
    assert t_quantile(1e9) == pytest.approx(1.959964, abs=1e-6)  # the normal's, with many seeds


def test_each_metric_gets_its_scale():
    assert scale_of("final_accuracy", [0.9, 0.8]) is LOGIT and scale_of("last3_local_accuracy", [0.9]) is LOGIT
    assert scale_of("time_s@0.8", [30.0, math.nan, 31.0]) is LOG and scale_of("total_energy_J", [5.0]) is LOG
    assert scale_of("rounds@0.9", [4, 5]) is LOG and scale_of("uplink_MB", [1.5]) is LOG
    assert scale_of("wasted_energy_J", [0.0, 2.0]) is AMOUNT and scale_of("excluded_memory", [3, 0]) is AMOUNT
    assert scale_of("energy_J@0.8", [0.0, 2.0]) is AMOUNT   # a cost of 0 has no log


def test_the_linear_mean_interval_by_hand_and_by_scipy():
    """0.80, 0.82, 0.81: mean 0.81, sample std 0.01, so 0.81 ± 4.302653 * 0.01 / sqrt(3) = 0.81 ± 0.024841."""
    n, mean, low, high = mean_interval([0.80, 0.82, 0.81])
    assert n == 3 and mean == pytest.approx(0.81)
    assert (low, high) == pytest.approx((0.81 - 0.024841, 0.81 + 0.024841), abs=1e-6)
    values = [18.1, 21.3, 15.0, 19.9, 17.2]
    expected = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert mean_interval(values)[2:] == pytest.approx(expected)


def test_an_accuracy_interval_is_made_on_logits_and_stays_inside_0_and_1():
    """The issue's FedAvg: 0.90, 0.77, 0.86. Student's t on the values gives 0.843 [0.678, 1.009], above 1. On
    logits (2.1972, 1.2083, 1.8153: mean 1.74028, s 0.49871): 1.74028 ± 4.302653 * 0.49871 / sqrt(3) =
    [0.50140, 2.97915], taken back by 1 / (1 + e^-x): 0.8507 [0.6228, 0.9516]."""
    assert mean_interval([0.90, 0.77, 0.86])[3] > 1   # the old interval, for the record
    n, center, low, high = mean_interval([0.90, 0.77, 0.86], LOGIT)
    assert (center, low, high) == pytest.approx((0.850722, 0.622793, 0.951622), abs=1e-6)
    x = logit([0.90, 0.77, 0.86])
    expected = stats.t.interval(0.95, 2, loc=np.mean(x), scale=stats.sem(x))
    assert (low, high) == pytest.approx(tuple(expit(expected)))
    assert mean_interval([1.0, 1.0, 1.0], LOGIT)[1:] == (1.0, 1.0, 1.0)   # all alike: exact, not the clamp's 0.9999
    assert 0 < mean_interval([1.0, 0.2, 0.99], LOGIT)[2] < mean_interval([1.0, 0.2, 0.99], LOGIT)[3] < 1


def test_a_cost_interval_is_made_on_logs_around_the_geometric_mean():
    values = [30.0, 32.0, 31.0]
    n, center, low, high = mean_interval(values, LOG)
    assert center == pytest.approx(stats.gmean(values)) == pytest.approx(30.989244, abs=1e-6)
    expected = stats.t.interval(0.95, 2, loc=np.mean(np.log(values)), scale=stats.sem(np.log(values)))
    assert (low, high) == pytest.approx(tuple(np.exp(expected)))


def test_an_amounts_interval_is_cut_at_0():
    """0, 0, 3: 1 ± 4.302653 * 1.7321 / sqrt(3) = [-3.30, 5.30]: an amount is never below 0."""
    assert mean_interval([0.0, 0.0, 3.0], AMOUNT)[1:] == pytest.approx((1.0, 0.0, 5.302653), abs=1e-6)


def test_seeds_without_a_value_are_left_out_and_one_seed_has_no_interval():
    assert mean_interval([0.80, math.nan, 0.82, 0.81]) == pytest.approx(mean_interval([0.80, 0.82, 0.81]))
    n, mean, low, high = mean_interval([52.5, math.nan], LOG)
    assert (n, mean) == (1, 52.5) and math.isnan(low) and math.isnan(high)   # never a made-up interval
    n, mean, _, _ = mean_interval([math.nan])
    assert n == 0 and math.isnan(mean) and MIN_SEEDS == 2


def test_the_linear_difference_interval_is_welchs_by_hand_and_by_scipy():
    """0.90, 0.91, 0.92 against 0.80, 0.82, 0.81: d = 0.10; each s²/n = 0.0001/3, so se = sqrt(0.0002/3) =
    0.0081650 and Welch's degrees of freedom (2a)² / (2a² / 2) = 4: 0.10 ± 2.776445 * 0.0081650 =
    0.10 ± 0.022670."""
    d, low, high = effect_interval([0.90, 0.91, 0.92], [0.80, 0.82, 0.81])
    assert d == pytest.approx(0.10)
    assert (low, high) == pytest.approx((0.10 - 0.022670, 0.10 + 0.022670), abs=1e-6)
    group, baseline = [7.2, 6.1, 8.4, 5.9], [18.1, 21.3, 15.0]   # unequal sizes and spreads
    expected = stats.ttest_ind(group, baseline, equal_var=False).confidence_interval(0.95)
    assert effect_interval(group, baseline)[1:] == pytest.approx((expected.low, expected.high))


def test_an_accuracy_difference_is_of_the_logit_means_with_delta_method_errors():
    """The same seeds on logits: means 2.317736 and 1.450884, taken back 0.910335 and 0.810134, d = 0.100201; s on
    logits 0.122613 and 0.065031, each times the slope p(1 - p) (0.081625, 0.153817) over sqrt(3): se² =
    (0.0057783² + 0.0057751²), se = 0.0081695, Welch's df 4.0: 0.100201 ± 2.776445 * 0.0081695 = [0.077519,
    0.122883]."""
    d, low, high = effect_interval([0.90, 0.91, 0.92], [0.80, 0.82, 0.81], LOGIT)
    assert (d, low, high) == pytest.approx((0.100201, 0.077519, 0.122883), abs=1e-6)
    far = effect_interval([0.99, 0.2, 0.999], [0.01, 0.9, 0.02], LOGIT)   # wide: kept inside [-1, 1]
    assert -1 <= far[1] < far[2] <= 1


def test_a_ratio_is_of_geometric_means_and_its_reciprocal_is_exact():
    """fedlps's 10, 11, 12 s against fedavg's 30, 32, 31 s: logs' means 2.395128 and 3.433640, Welch on logs (as
    scipy's ttest_ind of the logs) gives the log ratio's interval, exp of it the ratio's: 0.353981 [0.289806,
    0.432368]; fedavg's over fedlps's is its reciprocal, 2.825008 [2.312844, 3.450587]."""
    time = ratio_interval([10.0, 11.0, 12.0], [30.0, 32.0, 31.0])
    speedup = ratio_interval([30.0, 32.0, 31.0], [10.0, 11.0, 12.0])
    assert time == pytest.approx((0.353981, 0.289806, 0.432368), abs=1e-6)
    expected = stats.ttest_ind(np.log([10.0, 11.0, 12.0]), np.log([30.0, 32.0, 31.0]), equal_var=False)
    assert time[1:] == pytest.approx(tuple(np.exp(expected.confidence_interval(0.95))))
    assert speedup == pytest.approx((1 / time[0], 1 / time[2], 1 / time[1]))
    assert speedup[0] == pytest.approx(stats.gmean([30, 32, 31]) / stats.gmean([10, 11, 12]))
    assert all(math.isnan(v) for v in ratio_interval([0.0, 1.0], [2.0, 3.0]))   # 0 has no log


def test_effects_of_seeds_all_alike_are_exact_and_one_seed_gives_none():
    assert effect_interval([43.5, 43.5], [40.0, 40.0]) == (3.5, 3.5, 3.5)   # se = 0: no 0/0 degrees of freedom
    assert ratio_interval([43.5, 43.5], [40.0, 40.0]) == pytest.approx((1.0875,) * 3)
    d, low, high = effect_interval([0.575], [0.80, 0.82], LINEAR)
    assert d == pytest.approx(-0.235) and math.isnan(low) and math.isnan(high)
    r, low, high = ratio_interval([30.0, 32.0], [10.0])
    assert r == pytest.approx(math.sqrt(30 * 32) / 10) and math.isnan(low)


def test_verdicts_of_differences_and_of_ratios():
    assert verdict(0.077, 0.123) == HIGHER
    assert verdict(-0.123, -0.077) == LOWER
    assert verdict(-0.02, 0.05) == WITHIN_NOISE and verdict(0.0, 0.05) == WITHIN_NOISE   # holds 0: no difference
    assert verdict(1.2, 3.4, null=LOG.null) == HIGHER and verdict(0.8, 1.3, null=1.0) == WITHIN_NOISE
    assert verdict(0.3, 0.9, null=1.0) == LOWER
    assert verdict(math.nan, math.nan) == TOO_FEW == "too few seeds"


def test_interval_text():
    assert interval_text(0.81, 0.785159, 0.834841, 3) == "0.810 [0.785, 0.835]"
    assert interval_text(52.5, math.nan, math.nan, 1, n=1) == "52.5 (1 seed; need 2)"
    assert interval_text(52.5, math.nan, math.nan, 1) == "52.5 (too few seeds)"
    assert interval_text(math.nan, math.nan, math.nan, 1) == "-"
