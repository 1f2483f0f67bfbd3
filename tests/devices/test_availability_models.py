"""The sampling models: prefix property, long-run behaviour, and hand-checked diurnal windows."""
import math

import numpy as np
import pytest

from devices import AlwaysOn, Availability, Diurnal, MarkovOnOff, TraceIntervals, availability, fleet_availability
from devices.seeding import device_rng

SEED = np.random.SeedSequence(2024)
HOUR = 3600.0
DAY = 86400.0


def common_prefix_matches(short, long, horizon_s):
    """Rows of `short` starting before the horizon appear in `long`; only the last end may differ."""
    before = short[short[:, 0] < horizon_s]
    assert np.array_equal(long[: len(before), 0], before[:, 0])
    final = before[:, 1] < horizon_s
    assert np.array_equal(long[: len(before)][final, 1], before[final, 1])


def assert_well_formed(rows):
    assert rows.ndim == 2 and rows.shape[1] == 2
    assert np.all(rows[:, 1] > rows[:, 0])
    assert np.all(rows[1:, 0] > rows[:-1, 1])  # disjoint and not touching: merged


@pytest.mark.parametrize("model", [MarkovOnOff(300, 900), Diurnal(jitter_s=1800, timezone_spread_h=8)])
def test_prefix_property(model):
    short = model.sample(SEED, 20, 1e4)
    long = model.sample(SEED, 20, 1e5)
    for short_rows, long_rows in zip(short, long):
        assert_well_formed(long_rows)
        common_prefix_matches(short_rows, long_rows, 1e4)


def test_markov_is_reproducible_from_the_seed():
    model = MarkovOnOff(100, 50)
    first = model.sample(SEED, 5, 5e3)
    again = model.sample(np.random.SeedSequence(2024), 5, 5e3)
    other = model.sample(np.random.SeedSequence(2025), 5, 5e3)
    for a, b, c in zip(first, again, other):
        assert np.array_equal(a, b)
        assert not np.array_equal(a, c)


def test_markov_long_run_fraction_online():
    mean_on_s, mean_off_s, horizon_s = 100.0, 300.0, 1e5
    samples = MarkovOnOff(mean_on_s, mean_off_s).sample(SEED, 200, horizon_s)
    online_s = sum((np.clip(rows, 0, horizon_s) @ [-1, 1]).sum() for rows in samples)
    # Expected 0.25; the standard error over 200 devices x 250 cycles is about 0.0012.
    assert online_s / (200 * horizon_s) == pytest.approx(0.25, abs=0.01)


def test_markov_start_state():
    stationary = Availability([(MarkovOnOff(100, 300), 2000)], SEED).online_at(0.0).mean()
    assert stationary == pytest.approx(0.25, abs=0.04)  # 4 standard errors
    assert Availability([(MarkovOnOff(100, 300, start="on"), 50)], SEED).online_at(0.0).all()
    assert not Availability([(MarkovOnOff(100, 300, start="off"), 50)], SEED).online_at(0.0).any()


def test_markov_devices_do_not_depend_on_group_size():
    few = MarkovOnOff(100, 300).sample(SEED, 3, 1e4)
    many = MarkovOnOff(100, 300).sample(SEED, 30, 1e4)
    for a, b in zip(few, many):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("on, off, start, horizon", [
    (300, 300, "stationary", 86400), (600, 300, "on", 86400), (120, 300, "off", 2 * 86400),
    (5, 7, "stationary", 1000), (1e5, 1, "stationary", 86400), (1, 1e5, "off", 86400), (50, 50, "on", 50)])
@pytest.mark.parametrize("few_blocks", [False, True])
def test_batched_markov_sampling_is_the_per_device_path_bit_for_bit(on, off, start, horizon, few_blocks, monkeypatch):
    """sample() batches devices; _device_intervals is the per-device definition. Small batches put devices
    in several batches; drawing half the expected blocks makes many devices fall back to the per-device path."""
    monkeypatch.setattr(availability, "BATCH", 37)
    monkeypatch.setattr(availability, "BLOCK_MARGIN", 0.5 if few_blocks else 1.25)
    model = MarkovOnOff(on, off, start)
    for seed in range(3):
        ss = np.random.SeedSequence(seed, spawn_key=(2,))
        batched = model.sample(ss, 100, horizon)
        one_by_one = [model._device_intervals(device_rng(ss, i), horizon) for i in range(100)]
        assert len(batched) == 100
        for a, b in zip(batched, one_by_one):
            assert a.shape == b.shape and np.array_equal(a, b)


def test_a_markov_sample_holds_only_rows_starting_before_its_horizon():
    """Drawn in blocks of 64 cycles, an hour of 300-s cycles would hold ~64 rows a device; those starting at or past
    the hour are left out, and a day's sample begins with the same rows (the ends past the hour aside)."""
    model = MarkovOnOff(100, 200)
    hour, day = model.sample(SEED, 50, HOUR), model.sample(SEED, 50, DAY)
    for short, long in zip(hour, day):
        assert len(short) and short[:, 0].max() < HOUR and len(short) < 30
        common_prefix_matches(short, long, HOUR)
        assert len(long[long[:, 0] < HOUR]) == len(short)


def test_extending_the_horizon_changes_no_answer():
    groups = [(MarkovOnOff(500, 1500), 30)]
    lazy = Availability(groups, SEED, initial_horizon_s=1e3)
    times = [0.0, 250.0, 999.0]
    before = [lazy.online_at(t) for t in times]
    until_before = [lazy.online_until(d, 500.0) for d in range(30)]
    next_before = [lazy.next_online(d, 500.0) for d in range(30)]

    assert lazy.online_at(5e4).shape == (30,)
    assert lazy.horizon_s > 5e4
    for t, answer in zip(times, before):
        assert np.array_equal(lazy.online_at(t), answer)
    assert [lazy.online_until(d, 500.0) for d in range(30)] == until_before
    assert [lazy.next_online(d, 500.0) for d in range(30)] == next_before

    eager = Availability(groups, SEED, initial_horizon_s=1e6)
    assert [eager.online_until(d, 500.0) for d in range(30)] == until_before
    assert [eager.next_online(d, 500.0) for d in range(30)] == next_before
    for t in [0.0, 999.0, 5e4, 3e5]:
        assert np.array_equal(lazy.online_at(t), eager.online_at(t))


@pytest.mark.parametrize("size", [26, 3])
def test_online_until_each_is_online_until_of_each(size):
    """The batched query of a round's selected devices against the per-device one, on short horizons that the
    query must extend (an on-interval crossing the horizon), devices always on, never on, and in any order; asked
    all at once (numpy's arrays) and a few at a time (up to fleet_availability.FEW: one by one in Python), at times
    going back and forth (each device's last answer is where its next query starts)."""
    assert size > fleet_availability.FEW or size <= fleet_availability.FEW // 4
    groups = [(MarkovOnOff(500, 1500), 20), (AlwaysOn(), 2), (Diurnal(), 3),
              (TraceIntervals((np.zeros((0, 2)),), (None,)), 1)]
    batched = Availability(groups, SEED, initial_horizon_s=1e3)
    for t in [0.0, 250.0, 999.0, 5e4, 3e5, 400.0, 2e3]:
        reference = Availability(groups, SEED, initial_horizon_s=1e3)
        expected = [reference.online_until(d, t) for d in range(26)]
        chosen = np.random.default_rng(int(t)).permutation(26)
        answers = [batched.online_until_each(chosen[i:i + size], t).tolist() for i in range(0, 26, size)]
        assert sum(answers, []) == [expected[d] for d in chosen], t
    assert batched.online_until_each(np.zeros(0, dtype=int), 5.0).shape == (0,)
    with pytest.raises(IndexError):
        batched.online_until_each(np.array([26]), 5.0)


def test_online_each_and_count_online_agree_with_the_fleet_wide_query():
    """Some devices' answers (together, and one at a time) and the count of those online, against online_at, on a
    short horizon (Markov devices online past it: neither query re-samples for them), devices always on, never on,
    diurnal, at interval boundaries (online means start <= t < end), past the horizon, and at times going back and
    forth (each device's last answer is where the next query starts)."""
    groups = [(MarkovOnOff(500, 1500), 20), (MarkovOnOff(5000, 10), 20), (AlwaysOn(), 2), (Diurnal(), 3),
              (TraceIntervals((np.zeros((0, 2)), np.array([[10.0, 20.0], [30.0, 40.0]])), (None, None)), 2)]
    reference = Availability(groups, SEED, initial_horizon_s=1e6)
    boundaries = [float(x) for x in reference.intervals(0).ravel()[:4]] + [10.0, 20.0, 30.0, 40.0]
    queried = Availability(groups, SEED, initial_horizon_s=1e3)
    draw = np.random.default_rng(1)
    for t in [0.0, 5.0, 250.0, 999.0, *boundaries, 5e4, 400.0, 3e5, 2e3, 1e5]:
        online = reference.online_at(t)
        some = draw.integers(47, size=30)
        assert queried.online_each(some, t).tolist() == online[some].tolist(), t
        assert queried.online_each(np.arange(47), t).tolist() == online.tolist(), t
        assert [queried.online_one(int(d), t) for d in some] == online[some].tolist(), t
        assert queried.count_online(t) == online.sum() > 0, t
    assert queried.online_each(np.array([46, 46]), 10.0).tolist() == [True, True]
    assert queried.online_each(np.array([46]), 20.0).tolist() == [False]
    assert queried.online_each(np.zeros(0, dtype=int), 20.0).shape == (0,)
    fresh = Availability(groups, SEED, initial_horizon_s=1e3)
    fresh.online_each(np.arange(20, 40), 500.0), fresh.count_online(500.0)
    assert fresh.horizon_s == 1e3   # the devices online past the horizon need no longer sample


def test_online_until_each_gives_the_horizon_where_the_need_ends_before_it():
    """A device online past the sampled horizon: where the caller's need ends before the horizon it gets the
    horizon (a lower bound that decides the same comparisons) and nothing is re-sampled; where the need reaches
    past it, the true end, re-sampled."""
    availability = Availability([(MarkovOnOff(5000, 10), 200)], SEED, initial_horizon_s=100.0)
    online = np.flatnonzero(availability.online_at(0.0))
    chosen = online[:50]
    needed = np.full(50, 60.0)
    lower = availability.online_until_each(chosen, 0.0, needed)
    assert availability.horizon_s == 100.0 and (lower == 100.0).any()
    exact = Availability([(MarkovOnOff(5000, 10), 200)], SEED, initial_horizon_s=1e6)
    truth = np.array([exact.online_until(int(d), 0.0) for d in chosen])
    assert np.array_equal(lower, np.where(truth >= 100.0, 100.0, truth))
    needed[0] = 150.0  # one task reaches past the horizon: a longer sample, and the same rule under its horizon
    again = availability.online_until_each(chosen, 0.0, needed)
    horizon = availability.horizon_s
    assert horizon > 150.0 and np.array_equal(again, np.where(truth >= horizon, horizon, truth))

    pick = np.r_[np.flatnonzero(lower == 100.0)[:2], np.flatnonzero(lower < 100.0)[:1]]   # asked one by one
    few = Availability([(MarkovOnOff(5000, 10), 200)], SEED, initial_horizon_s=100.0)
    assert np.array_equal(few.online_until_each(chosen[pick], 0.0, np.full(3, 60.0)), lower[pick])
    assert few.horizon_s == 100.0 and len(pick) == 3
    assert np.array_equal(few.online_until_each(chosen[pick], 0.0, np.r_[150.0, 60.0, 60.0]),
                          np.where(truth[pick] >= horizon, horizon, truth[pick]))
    assert few.horizon_s == horizon


def test_a_settled_answer_does_not_extend_the_horizon():
    availability = Availability([(AlwaysOn(), 2)], SEED, initial_horizon_s=100.0)
    assert availability.online_until(1, 1e12) == math.inf
    assert availability.next_online(1, 1e12) == 1e12
    assert availability.horizon_s == 100.0


@pytest.mark.parametrize(
    "hour, online",
    [
        (0.0, True),  # inside the window that opened at 22:00 the day before
        (5.99, True),
        (6.0, False),
        (12.0, False),
        (21.99, False),
        (22.0, True),
        (23.5, True),
        (24 + 3.0, True),  # across midnight into day 1
        (24 + 6.0, False),
        (24 * 30 + 22.5, True),  # a month later, past the first horizon
    ],
)
def test_diurnal_overnight_window_by_hand(hour, online):
    availability = Availability([(Diurnal(22, 6, jitter_s=0, timezone_spread_h=0), 3)], SEED)
    assert availability.online_at(hour * HOUR).tolist() == [online] * 3


def test_diurnal_queries_by_hand():
    availability = Availability([(Diurnal(22, 6, jitter_s=0), 1)], SEED)
    assert availability.online_until(0, 0.0) == 6 * HOUR
    assert availability.online_until(0, 23 * HOUR) == 30 * HOUR
    assert availability.next_online(0, 7 * HOUR) == 22 * HOUR
    assert availability.next_online(0, 30 * HOUR) == 46 * HOUR
    assert availability.intervals(0)[:2].tolist() == [[0, 6 * HOUR], [22 * HOUR, 30 * HOUR]]


def test_diurnal_daytime_window():
    availability = Availability([(Diurnal(8, 17, jitter_s=0), 1)], SEED)
    assert availability.online_at(2 * DAY).tolist() == [False]  # samples past day 1
    assert availability.intervals(0)[:2].tolist() == [[8 * HOUR, 17 * HOUR], [32 * HOUR, 41 * HOUR]]


def test_diurnal_time_zones_shift_whole_windows():
    spread_h = 24
    samples = Diurnal(22, 6, jitter_s=0, timezone_spread_h=spread_h).sample(SEED, 50, 10 * DAY)
    opens = []
    for rows in samples:
        inner = rows[1:-1]  # whole windows only: the first may be clipped at 0
        assert np.allclose(inner[:, 1] - inner[:, 0], 8 * HOUR)
        assert np.allclose(np.diff(inner[:, 0]), DAY)
        opens.append(inner[0, 0] % DAY)
    offsets_h = (22 * HOUR - np.array(opens) + DAY / 2) % DAY / HOUR - 12  # local = global + offset
    assert np.all(np.abs(offsets_h) <= spread_h / 2)
    assert offsets_h.std() > 3  # uniform on [-12, 12] h has std 6.9 h


def test_diurnal_jitter_keeps_windows_ordered_and_near_nominal():
    jitter_s = 1800
    samples = Diurnal(22, 6, jitter_s=jitter_s).sample(SEED, 20, 60 * DAY)
    shifts = []
    for rows in samples:
        assert_well_formed(rows)
        inner = rows[1:-1]
        shifts.append((inner[:, 0] - 22 * HOUR) % DAY)
    shifts = (np.concatenate(shifts) + DAY / 2) % DAY - DAY / 2
    assert np.abs(shifts).max() <= 4 * HOUR  # the clip: half the 8 h window
    assert shifts.std() == pytest.approx(jitter_s, rel=0.1)


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: MarkovOnOff(0, 10), "mean_on_s"),
        (lambda: MarkovOnOff(10, math.inf), "mean_off_s"),
        (lambda: MarkovOnOff(10, 10, start="sometimes"), "start"),
        (lambda: Diurnal(22, 22), "on_hour"),
        (lambda: Diurnal(24, 6), "on_hour"),
        (lambda: Diurnal(jitter_s=-1), "jitter_s"),
        (lambda: Diurnal(timezone_spread_h=30), "timezone_spread_h"),
    ],
)
def test_bad_model_settings_are_rejected(make, field):
    with pytest.raises(ValueError, match=field):
        make()
