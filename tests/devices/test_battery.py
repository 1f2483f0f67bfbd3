"""Batteries on the simulated clock, every number worked out by hand in a comment."""
import math

import numpy as np
import pytest

from devices import AlwaysOn, Diurnal, TraceIntervals
from devices.battery import Batteries, BatterySpec

SEED = np.random.SeedSequence(5)
HOUR = 3600.0
# A 1 Wh battery holds 3600 J.
CAPACITY_J = 3600.0


def batteries(*groups, seed=SEED, **options):
    return Batteries(list(groups), seed, **options)


def one(spec):
    return batteries((spec, 1))


def test_a_task_empties_the_battery_in_the_piece_that_drains_it():
    b = one(BatterySpec(1.0, initial_level=0.01))  # 0.01 * 3600 = 36 J
    load = [(0.0, 2.0, 5.0), (2.0, 12.0, 3.0), (12.0, 13.0, 4.0)]
    # 5 W for 2 s: 36 - 10 = 26 J at t = 2; then 3 W empties 26 J in 26/3 s.
    assert abs(b.empty_at(0, 0.0, load) - (2 + 26 / 3)) < 1e-9
    # Dropped there: settling at that instant leaves exactly 0 J, and the level stays 0 (no charger).
    b.settle(0, b.empty_at(0, 0.0, load), load)
    assert b.level_at(0, 2 + 26 / 3 + 1) == 0.0
    assert b.empty_at(0, 20.0, [(20.0, 21.0, 1.0)]) == 20.0  # an empty battery drops the next task at once


def test_a_load_that_fits_never_empties_and_one_ending_at_exactly_zero_completes():
    b = one(BatterySpec(1.0, initial_level=0.01))  # 36 J
    assert b.empty_at(0, 0.0, [(0.0, 2.0, 5.0), (2.0, 10.0, 3.0)]) == math.inf  # 10 + 24 = 34 J < 36 J
    assert b.empty_at(0, 0.0, [(0.0, 2.0, 5.0), (2.0, 10.0, 3.25)]) == math.inf  # 10 + 26 = 36 J: ends at 0
    assert b.empty_at(0, 0.0, []) == math.inf


def test_the_background_draw_in_a_gap_empties_the_battery_within_the_load():
    b = one(BatterySpec(1.0, initial_level=0.01, background_W=2.0))  # 36 J
    # 1 W on [0, 6): 30 J; the gap [6, 100) at 2 W empties 30 J at t = 6 + 30/2 = 21, before the next piece.
    assert b.empty_at(0, 0.0, [(0.0, 6.0, 1.0), (100.0, 101.0, 1.0)]) == 21.0
    # Asked from t0 = 50 on, after the battery ran flat at 21 (background only, no load): empty at once.
    assert b.empty_at(0, 50.0, [(50.0, 60.0, 1.0)]) == 50.0


def test_settle_applies_the_load_and_the_background_draw_between_tasks():
    b = one(BatterySpec(1.0, background_W=0.5))  # full: 3600 J
    b.settle(0, 10.0, [(2.0, 4.0, 3.0)])
    # 0.5 W on [0, 2): -1; 3 W on [2, 4): -6; 0.5 W on [4, 10): -3.  3600 - 1 - 6 - 3 = 3590 J.
    assert b.level_at(0, 10.0) == 3590.0
    assert b.level_at(0, 20.0) == 3585.0  # 10 s of background: -5 J
    # A second task: 4 W on [20, 30) = 40 J, after 10 s of background (5 J): 3590 - 5 - 40 = 3545 J.
    b.settle(0, 30.0, [(20.0, 30.0, 4.0)])
    assert abs(b.level_at(0, 30.0) - 3545.0) < 1e-6
    # The background empties 3545 J at 0.5 W in 7090 s: at t = 7120, then the level clamps at 0.
    assert abs(b.level_at(0, 7000.0) - (3545.0 - 0.5 * 6970)) < 1e-6
    assert b.level_at(0, 7120.0) == 0.0
    assert b.level_at(0, 1e6) == 0.0


def test_settle_applies_only_the_parts_of_pieces_inside_its_span():
    b = one(BatterySpec(1.0))  # 3600 J
    load = [(0.0, 10.0, 2.0), (10.0, 20.0, 1.0)]
    b.settle(0, 5.0, load)  # [0, 5) at 2 W: 3590 J
    assert b.level_at(0, 5.0) == 3590.0
    b.settle(0, 20.0, load)  # [5, 10) at 2 W and [10, 20) at 1 W: 3590 - 10 - 10 = 3570 J
    assert b.level_at(0, 20.0) == 3570.0


def test_a_nightly_charging_window_fills_the_battery_by_hand():
    # Plugged in 22:00-06:00 every day (no jitter, one time zone), so also on [0, 06:00) of day 0.
    spec = BatterySpec(1.0, initial_level=0.2, min_level=0.5, charge_W=10.0, charging=Diurnal(22, 6, 0, 0))
    b = one(spec)
    assert b.level_at(0, 100.0) == 1720.0  # 720 J (0.2 * 3600) + 10 W * 100 s
    assert b.level_at(0, 287.0) == 3590.0  # full at (3600 - 720) / 10 = 288 s
    assert b.level_at(0, 288.0) == 3600.0
    assert b.level_at(0, 6 * HOUR) == 3600.0  # stays full on the charger
    # A task in the day, 1 W for 2880 s from 06:00 (21600 s): back to 720 J at 24480 s.
    b.settle(0, 24480.0, [(21600.0, 24480.0, 1.0)])
    assert b.level_at(0, 22 * HOUR) == 720.0  # unplugged until 22:00 (79200 s), no background draw
    assert not b.eligible(24480.0)[0]  # 720 J < 0.5 * 3600 = 1800 J
    # Charging from 22:00 reaches 1800 J after (1800 - 720) / 10 = 108 s.
    assert b.next_eligible(24480.0)[0] == 79200.0 + 108.0
    assert b.eligible(79308.0)[0] and not b.eligible(79307.0)[0]
    assert b.level_at(0, 79487.0) == 3590.0  # full at 79200 + (3600 - 720) / 10 = 79488 s
    assert b.level_at(0, 79488.0) == 3600.0
    assert b.level_at(0, 23 * HOUR) == 3600.0  # 720 + 10 * 3600 clamped to 3600
    assert b.level_at(0, 30 * HOUR) == 3600.0  # 06:00 on day 1: full ever since


def test_always_plugged_with_enough_charging_never_empties_and_stays_full():
    b = one(BatterySpec(1.0, initial_level=0.5, charge_W=5.0, charging=AlwaysOn()))  # 1800 J
    assert b.empty_at(0, 0.0, [(0.0, 1e6, 5.0)]) == math.inf  # charging covers the draw: net 0
    b.settle(0, 100.0, [(0.0, 100.0, 5.0)])
    assert b.level_at(0, 100.0) == 1800.0
    b.settle(0, 200.0, [(100.0, 200.0, 3.0)])  # net +2 W for 100 s: 2000 J
    assert b.level_at(0, 200.0) == 2000.0
    assert b.level_at(0, 1000.0) == 3600.0  # net +5 W idle: full at 200 + 1600 / 5 = 520 s, then clamped
    b.settle(0, 2000.0, [(1000.0, 2000.0, 4.0)])
    assert b.level_at(0, 2000.0) == 3600.0  # full on the charger under a smaller load: stays full


def test_a_plug_in_trace_charges_only_inside_its_intervals():
    plugged = TraceIntervals((np.array([[10.0, 20.0]]),), (None,))
    b = one(BatterySpec(1.0, initial_level=0.0, min_level=0.05, charge_W=6.0, charging=plugged))
    assert b.level_at(0, 10.0) == 0.0
    assert b.level_at(0, 15.0) == 30.0  # 6 W * 5 s
    assert b.level_at(0, 100.0) == 60.0  # 6 W * 10 s, then unplugged for good
    # 0.05 * 3600 = 180 J: more than the trace's 60 J ever gives.
    assert b.next_eligible(0.0)[0] == math.inf


def test_initial_levels_drawn_per_device_are_in_range_and_reproducible():
    spec = BatterySpec(2.0, initial_level=(0.25, 0.75))  # 7200 J
    levels = batteries((spec, 50)).levels_at(0.0)
    assert ((levels >= 0.25) & (levels <= 0.75)).all()
    assert len(set(levels.tolist())) == 50  # different across devices
    assert np.array_equal(batteries((spec, 50)).levels_at(0.0), levels)  # same seed, same levels
    assert not np.array_equal(batteries((spec, 50), seed=np.random.SeedSequence(6)).levels_at(0.0), levels)
    # Each group draws from its own stream: a group in front does not shift this one's draws.
    two = batteries((BatterySpec(1.0, initial_level=(0.0, 1.0)), 3), (spec, 50))
    assert not np.array_equal(two.levels_at(0.0)[3:], levels)  # group 1's stream, not group 0's
    assert np.array_equal(batteries((spec, 50), (spec, 3)).levels_at(0.0)[:50], levels)


def test_without_a_charger_a_battery_below_min_level_is_never_eligible_again():
    b = batteries((BatterySpec(1.0, initial_level=0.1, min_level=0.2), 1), (BatterySpec(1.0, min_level=0.2), 1))
    assert b.eligible(0.0).tolist() == [False, True]  # 360 J < 720 J; 3600 J >= 720 J
    assert b.next_eligible(5.0).tolist() == [math.inf, 5.0]
    # Charging that never outruns the background draw never lifts it either.
    weak = one(BatterySpec(1.0, initial_level=0.1, min_level=0.2, charge_W=1.0, background_W=1.0, charging=AlwaysOn()))
    assert weak.next_eligible(0.0)[0] == math.inf


def test_next_eligible_gives_up_when_the_windows_never_make_up_for_the_drain():
    # Plugged 00:00-01:00 at 1 W against 0.5 W of draw: +0.5 W * 3600 s = 1800 J at best, then the other 23 h at
    # -0.5 W drain 41400 J, back to 0. The level never reaches 0.6 * 3600 = 2160 J.
    spec = BatterySpec(1.0, initial_level=0.0, min_level=0.6, charge_W=1.0, background_W=0.5, charging=Diurnal(0, 1, 0))
    assert one(spec).next_eligible(0.0)[0] == math.inf  # gives up after the default 365 days
    assert batteries((spec, 1), max_wait_s=10 * 86400).next_eligible(0.0)[0] == math.inf
    # At 0.5 * 3600 = 1800 J the first window just makes it: 1800 / 0.5 W = 3600 s, as it closes.
    reachable = BatterySpec(1.0, initial_level=0.0, min_level=0.5, charge_W=1.0, background_W=0.5,
                            charging=Diurnal(0, 1, 0))
    assert one(reachable).next_eligible(0.0)[0] == 3600.0


def test_devices_without_a_battery_are_never_limited():
    b = batteries((None, 2), (BatterySpec(1.0, initial_level=0.1, min_level=0.5), 1))
    assert b.has_battery().tolist() == [False, False, True]
    assert b.eligible(0.0).tolist() == [True, True, False]
    assert b.next_eligible(3.0).tolist() == [3.0, 3.0, math.inf]
    assert b.empty_at(0, 0.0, [(0.0, 1e9, 100.0)]) == math.inf
    levels = b.levels_at(0.0)
    assert np.isnan(levels[:2]).all() and levels[2] == 0.1
    assert math.isnan(b.level_at(1, 0.0))
    b.settle(1, 10.0, [(0.0, 10.0, 100.0)])
    assert b.eligible(10.0)[1]


def test_state_round_trip_gives_identical_answers():
    spec = BatterySpec(1.0, initial_level=(0.1, 0.4), min_level=0.3, charge_W=4.0, background_W=0.25,
                       charging=Diurnal(22, 6, 1800, 6))
    b = batteries((spec, 4), (None, 1))
    b.settle(0, 40000.0, [(30000.0, 35000.0, 0.5)])
    b.settle(2, 50000.0, [(45000.0, 50000.0, 0.1)])
    copy = batteries((spec, 4), (None, 1))
    copy.restore(b.state())
    load = [(60000.0, 61000.0, 2.0), (61000.0, 90000.0, 0.3)]
    for t in (50000.0, 70000.0, 100000.0, 300000.0):
        assert np.array_equal(copy.levels_at(t), b.levels_at(t), equal_nan=True)
        assert np.array_equal(copy.eligible(t), b.eligible(t))
        assert np.array_equal(copy.next_eligible(t), b.next_eligible(t))
    assert [copy.empty_at(d, 60000.0, load) for d in range(5)] == [b.empty_at(d, 60000.0, load) for d in range(5)]
    # Answers asked in another order, after the walks above left their resume points, are the same too.
    fresh = batteries((spec, 4), (None, 1))
    fresh.restore(b.state())
    assert np.array_equal(fresh.levels_at(300000.0), b.levels_at(300000.0), equal_nan=True)


def test_next_eligible_is_eligible_and_empty_at_settles_to_zero_at_awkward_numbers():
    spec = BatterySpec(0.7, initial_level=0.013, min_level=0.31, charge_W=3.3, background_W=0.17,
                       charging=Diurnal(21.3, 5.7, 900, 3))
    b = batteries((spec, 20))
    next_eligible = b.next_eligible(123.4)
    assert all(b.eligible(t)[d] for d, t in enumerate(next_eligible))
    for d, t in enumerate(next_eligible):
        load = [(t, t + 7.1, 9.7), (t + 7.1, t + 1e5, 1.3)]
        empty = b.empty_at(d, t, load)
        assert t < empty < t + 1e5
        b.settle(d, empty, load)
        assert b.level_at(d, empty) == 0.0


def test_queries_before_the_settled_instant_are_errors():
    b = one(BatterySpec(1.0))
    b.settle(0, 100.0)
    for query in (lambda: b.level_at(0, 99.0), lambda: b.eligible(99.0), lambda: b.empty_at(0, 99.0, []),
                  lambda: b.settle(0, 99.0), lambda: b.next_eligible(99.0)):
        with pytest.raises(ValueError, match="settled"):
            query()


@pytest.mark.parametrize(
    "load",
    [[(5.0, 4.0, 1.0)], [(0.0, 5.0, -1.0)], [(0.0, 5.0, 1.0), (4.0, 6.0, 1.0)], [(0.0, math.inf, 1.0)]],
)
def test_bad_loads_are_errors(load):
    with pytest.raises(ValueError, match="load"):
        one(BatterySpec(1.0)).empty_at(0, 0.0, load)


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"capacity_Wh": 0.0}, "capacity_Wh"),
        ({"capacity_Wh": -1.0}, "capacity_Wh"),
        ({"initial_level": 1.5}, "initial_level"),  # a level above capacity
        ({"initial_level": (0.5, 1.2)}, "initial_level"),
        ({"initial_level": (0.6, 0.4)}, "initial_level"),
        ({"min_level": 1.0}, "min_level"),
        ({"min_level": -0.1}, "min_level"),
        ({"charge_W": -1.0}, "charge_W"),
        ({"background_W": -0.5}, "background_W"),
        ({"charging": "nightly"}, "charging"),
    ],
)
def test_bad_specs_are_errors_naming_the_field(fields, named):
    with pytest.raises(ValueError, match=named):
        BatterySpec(**{"capacity_Wh": 1.0, **fields})


def test_eligible_agrees_with_the_level_walked_to_t():
    # eligible() skips the walk where the level surely clears min_level; it must answer as the walk does.
    spec = BatterySpec(0.5, initial_level=(0.0, 1.0), min_level=0.4, charge_W=2.0, background_W=0.2,
                       charging=Diurnal(20, 8, 3600, 8))
    b = batteries((spec, 40), (None, 2))
    for t in np.linspace(0.0, 5 * 86400.0, 37):
        walked = [not b.has_battery()[d] or b.level_at(d, t) >= spec.min_level * b.capacity_J[d] for d in range(42)]
        assert b.eligible(t).tolist() == walked
