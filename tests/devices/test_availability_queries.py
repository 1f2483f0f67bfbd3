"""Queries on hand-made traces, checked by hand at and around every boundary."""
import math

import numpy as np
import pytest

from devices import AlwaysOn, Availability, TraceIntervals

SEED = np.random.SeedSequence(7)
# Device 0: [0,10) and [10,20) touch and merge into [0,20); then [30,40); offline for good after 40.
ONCE = np.array([[0, 10], [10, 20], [30, 40]])
# Device 1: [5,8) every 10 s.
EVERY_TEN = np.array([[5, 8]])
# Device 2: [0,2) and [7,10) every 10 s: [7,10) joins the next period's [10,12).
ACROSS_PERIODS = np.array([[0, 2], [7, 10]])


@pytest.fixture
def availability():
    traces = TraceIntervals((ONCE, EVERY_TEN, ACROSS_PERIODS), (None, 10.0, 10.0))
    # A short first horizon so that the queries below must extend it.
    return Availability([(traces, 3)], SEED, initial_horizon_s=4.0)


@pytest.mark.parametrize(
    "t, expected",
    [
        (0, [True, False, True]),
        (2, [True, False, False]),
        (5, [True, True, False]),
        (7.999, [True, True, True]),
        (8, [True, False, True]),
        (10, [True, False, True]),
        (12, [True, False, False]),
        (20, [False, False, True]),  # device 2: [17, 22)
        (35, [True, True, False]),
        (40, [False, False, True]),
        (1005, [False, True, False]),
    ],
)
def test_online_at(availability, t, expected):
    assert availability.online_at(t).tolist() == expected


@pytest.mark.parametrize(
    "device, t, expected",
    [
        (0, 0, 20),  # through the merged boundary at 10
        (0, 10, 20),
        (0, 19.5, 20),
        (0, 20, 20),  # offline at an interval's end: t itself
        (0, 25, 25),
        (0, 35, 40),
        (1, 5, 8),
        (1, 16, 18),
        (1, 1005, 1008),
        (2, 8, 12),  # joined across the period boundary
        (2, 1, 2),
        (2, 99, 102),
    ],
)
def test_online_until(availability, device, t, expected):
    assert availability.online_until(device, t) == expected


@pytest.mark.parametrize(
    "device, t, expected",
    [
        (0, 5, 5),
        (0, 20, 30),
        (0, 40, math.inf),
        (0, 1e6, math.inf),
        (1, 0, 5),
        (1, 8, 15),
        (1, 18, 25),
        (1, 100009, 100015),
        (2, 3, 7),
    ],
)
def test_next_online(availability, device, t, expected):
    assert availability.next_online(device, t) == expected


def test_intervals_are_merged_and_hide_the_never_again_row(availability):
    availability.online_at(25)
    assert availability.intervals(0).tolist() == [[0, 20], [30, 40]]
    assert availability.intervals(1)[:3].tolist() == [[5, 8], [15, 18], [25, 28]]
    assert availability.intervals(2)[:3].tolist() == [[0, 2], [7, 12], [17, 22]]


def test_devices_cycle_through_traces_in_group_order():
    traces = TraceIntervals((ONCE, EVERY_TEN), (None, 10.0))
    availability = Availability([(AlwaysOn(), 1), (traces, 4)], SEED)
    # Device 0 is always on; devices 1..4 get traces 0, 1, 0, 1.
    assert availability.online_at(6).tolist() == [True, True, True, True, True]
    assert availability.online_at(25).tolist() == [True, False, True, False, True]
    assert availability.online_until(0, 1e9) == math.inf
    assert availability.next_online(0, 123.0) == 123.0


def test_random_assignment_is_seeded_and_uses_every_trace():
    traces = TraceIntervals((ONCE, EVERY_TEN), (None, 10.0), assignment="random")
    first = Availability([(traces, 40)], SEED).online_at(25)
    again = Availability([(traces, 40)], SEED).online_at(25)
    assert first.tolist() == again.tolist()
    assert 0 < first.sum() < 40


def test_an_empty_periodic_trace_is_never_online():
    traces = TraceIntervals((np.empty((0, 2)),), (10.0,))
    availability = Availability([(traces, 1)], SEED)
    assert not availability.online_at(5)[0]
    assert availability.next_online(0, 5) == math.inf


@pytest.mark.parametrize(
    "trace, period, message",
    [
        ([[-1, 2]], None, "start_s"),
        ([[3, 2]], None, "start_s <= end_s"),
        ([[0, np.nan]], None, "finite"),
        ([[0, 1]], 0.0, "period_s"),
        ([0, 1, 2], None, "shape"),
    ],
)
def test_bad_traces_are_rejected(trace, period, message):
    with pytest.raises(ValueError, match=message):
        TraceIntervals((np.array(trace, dtype=float),), (period,))


def test_one_period_per_trace():
    with pytest.raises(ValueError, match="one period_s per trace"):
        TraceIntervals((ONCE, EVERY_TEN), (None,))


def test_queries_reject_bad_arguments(availability):
    with pytest.raises(ValueError, match="finite"):
        availability.online_at(math.inf)
    with pytest.raises(IndexError):
        availability.online_until(3, 0.0)
    with pytest.raises(IndexError):
        availability.next_online(-1, 0.0)


def test_a_period_clips_what_lies_past_it():
    # FedScale replays t % period, so the part of [5, 15) past 10 is never reached: online on [5, 10) + 10k.
    traces = TraceIntervals((np.array([[5, 15]]),), (10.0,))
    availability = Availability([(traces, 1)], SEED)
    assert availability.online_at(12).tolist() == [False]
    assert availability.online_until(0, 7) == 10
    assert availability.next_online(0, 10) == 15
