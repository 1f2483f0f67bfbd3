"""Rate processes: phases integrated piece by piece, by hand; the reuse of availability's samplers; loaders."""
import json
import math

import numpy as np
import pytest

from devices.availability import Diurnal, MarkovOnOff
from devices.rates import Constant, DiurnalRate, MarkovSlowdown, Rates, TraceRate, load_rate_trace
from devices.seeding import child_seed
from test_trace_files import one_line_error, write  # same one-line error checks

SEED = np.random.SeedSequence(2024)
HOUR = 3600.0
STEPS = [(0, 1), (10, 0.5), (20, 2)]  # factor 1 on [0, 10), 0.5 on [10, 20), 2 from 20 on


def one_device(model, **options):
    return Rates([(model, 1)], SEED, **options)


def test_phase_integrated_piece_by_piece():
    rates = one_device(TraceRate([STEPS]))
    # From t0 = 5 at base 100/s: [5, 10) at 100/s does 500, [10, 20) at 50/s does 500, then 500 at 200/s takes
    # 2.5 s: 5 + 5 + 10 + 2.5 = 22.5 (at the start rate alone it would be 5 + 15 = 20).
    assert rates.finish_time(0, 5.0, 1500.0, 100.0) == 22.5
    assert rates.duration(0, 5.0, 1500.0, 100.0) == 17.5
    assert rates.amount_done(0, 5.0, 22.5, 100.0) == 1500.0
    assert rates.amount_done(0, 5.0, 15.0, 100.0) == 750.0  # 500 + 5 s at 50/s
    assert rates.amount_done(0, 7.0, 7.0, 100.0) == 0.0
    assert rates.finish_time(0, 5.0, 0.0, 100.0) == 5.0
    # Within one piece: 200 at 50/s from 12 takes 4 s.
    assert rates.finish_time(0, 12.0, 200.0, 100.0) == 16.0
    # The last factor holds forever without a period: 2e6 at 200/s from 100 takes 1e4 s.
    assert rates.finish_time(0, 100.0, 2e6, 100.0) == 10100.0
    assert rates.factor_at(0, 1e9) == 2.0


def test_phase_starting_exactly_at_a_step():
    rates = one_device(TraceRate([STEPS]))
    assert rates.factor_at(0, 10.0) == 0.5 and rates.factor_at(0, 9.999) == 1.0  # right-continuous
    assert rates.finish_time(0, 10.0, 250.0, 100.0) == 15.0  # 250 at 50/s
    assert rates.finish_time(0, 10.0, 600.0, 100.0) == 20.5  # 500 on [10, 20), then 100 at 200/s
    assert rates.finish_time(0, 0.0, 1000.0, 100.0) == 10.0  # ends exactly at the step
    assert rates.amount_done(0, 10.0, 20.0, 100.0) == 500.0


def test_period_replays_the_trace():
    rates = one_device(TraceRate([STEPS], period_s=30), initial_horizon_s=50)
    # t mod 30: [30, 40) factor 1, [40, 50) 0.5, [50, 60) 2, [60, 70) 1 ...
    assert [rates.factor_at(0, t) for t in (35, 45, 59.5, 60, 75, 3e4 + 15)] == [1, 0.5, 2, 1, 0.5, 0.5]
    # From 55: [55, 60) at 200/s does 1000, the next 500 at 100/s takes 5 s: 65 (past the first horizon, 50).
    assert rates.finish_time(0, 55.0, 1500.0, 100.0) == 65.0
    assert rates.finish_time(0, 25.0, 1000.0, 100.0) == 30.0  # 5 s at 200/s, ending at the period
    # Rows at or past the period are never reached: a trace [(0, 1), (10, 0.5), (20, 2)] with period 15 is
    # 1 on [0, 10) and 0.5 on [10, 15), then again.
    short = one_device(TraceRate([STEPS], period_s=15))
    assert [short.factor_at(0, t) for t in (12, 16, 26)] == [0.5, 1.0, 0.5]


def test_trace_assignment():
    traces = TraceRate([[(0, 1)], [(0, 0.5)], [(0, 0.25)]])
    cycled = Rates([(traces, 5)], SEED)
    assert [cycled.factor_at(d, 0) for d in range(5)] == [1, 0.5, 0.25, 1, 0.5]
    drawn = Rates([(TraceRate(traces.traces, assignment="random"), 200)], SEED)
    assert {drawn.factor_at(d, 0) for d in range(200)} == {1, 0.5, 0.25}


@pytest.mark.parametrize("t0, amount, base_rate", [(1 / 3, 0.1 * 3, 0.7), (12345.678, 1e9 / 7, 3.3e7), (0, 1, 3)])
def test_constant_is_the_plain_division(t0, amount, base_rate):
    rates = Rates([(Constant(), 2), (TraceRate([[(0, 1.0)]]), 1)], SEED)
    for device in range(3):
        assert rates.duration(device, t0, amount, base_rate) == amount / base_rate
        assert rates.finish_time(device, t0, amount, base_rate) == t0 + amount / base_rate
    assert rates.is_constant(0) and not rates.is_constant(2)
    assert rates.factor_at(1, 1e7) == 1.0


def test_factor_one_over_a_whole_phase_is_the_plain_division():
    # Factor 1 on [0, 10), 0.5 on [10, 20) and 1 from 20 on: phases within [0, 10) or after 20 take amount / R.
    rates = one_device(TraceRate([[(0, 1), (10, 0.5), (20, 1)]]))
    assert rates.duration(0, 1 / 3, 0.3, 0.7) == 0.3 / 0.7
    assert rates.duration(0, 25.0, 1e3 / 7, 0.7) == 1e3 / 7 / 0.7


def test_markov_slowdown_reuses_markov_on_off():
    model = MarkovSlowdown(factor=0.5, mean_normal_s=600, mean_slow_s=120)
    rates = Rates([(model, 20)], SEED)
    horizon = rates.horizon_s
    slow = MarkovOnOff(mean_on_s=120, mean_off_s=600).sample(child_seed(SEED, 0), 20, horizon)
    assert model.slow_periods() == MarkovOnOff(120, 600)
    for device, intervals in enumerate(slow):
        times, factors = rates.steps(device)
        slow_starts = times[factors == 0.5]
        assert np.array_equal(slow_starts, intervals[intervals[:, 0] < horizon, 0])
        inner = intervals[(intervals[:, 1] < horizon)]
        assert np.all(np.isin(inner[:, 1], times[factors == 1.0]))
    # Device 0 by hand: a slow period [a, b) with normal time around it.
    device, rows = 0, slow[0]
    i = next(i for i in range(1, len(rows) - 1) if rows[i, 0] - rows[i - 1, 1] > 2 and rows[i + 1, 0] - rows[i, 1] > 2)
    a, b = rows[i]
    assert rates.factor_at(device, a) == 0.5 and rates.factor_at(device, (a + b) / 2) == 0.5
    assert rates.factor_at(device, a - 1) == 1.0 and rates.factor_at(device, b) == 1.0
    # From a - 1 at 1000/s: 1 s at 1000/s, (b - a) s at 500/s, then 1000 more at 1000/s takes 1 s: b + 1.
    amount = 1000 + 500 * (b - a) + 1000
    assert rates.finish_time(device, a - 1, amount, 1000.0) == pytest.approx(b + 1, abs=1e-9)
    assert rates.amount_done(device, a - 1, b + 1, 1000.0) == pytest.approx(amount, rel=1e-12)
    # Inside the normal period before it, factor 1 all the way: exactly amount / R.
    assert rates.duration(device, a - 2, 700.0, 1000.0) == 0.7


def test_markov_slowdown_start_state():
    slow_first = Rates([(MarkovSlowdown(0.3, 100, 50, start="slow"), 10)], SEED)
    normal_first = Rates([(MarkovSlowdown(0.3, 100, 50, start="normal"), 10)], SEED)
    assert all(slow_first.factor_at(d, 0) == 0.3 for d in range(10))
    assert all(normal_first.factor_at(d, 0) == 1.0 for d in range(10))


def test_diurnal_rate_window_by_hand():
    model = DiurnalRate(factor=0.4, start_hour=18, end_hour=23)
    assert model.slow_windows() == Diurnal(on_hour=18, off_hour=23, jitter_s=0, timezone_spread_h=0)
    rates = Rates([(model, 3)], SEED)
    for device in range(3):
        times, factors = rates.steps(device)
        assert times[:3].tolist() == [0, 18 * HOUR, 23 * HOUR] and factors[:3].tolist() == [1, 0.4, 1]
    assert rates.factor_at(0, 18 * HOUR) == 0.4 and rates.factor_at(0, 23 * HOUR) == 1.0
    assert rates.factor_at(0, 86400 * 3 + 20 * HOUR) == 0.4
    # From 17:00 at 10/s: 1 h at 10/s (36000), then 0.5 h at 4/s (7200): ends at 18:30.
    assert rates.finish_time(0, 17 * HOUR, 36000 + 7200, 10.0) == 18.5 * HOUR
    # A window over midnight, 22:00 to 06:00: slow from 0 (yesterday's window) to 6 h.
    night = Rates([(DiurnalRate(0.5, 22, 6), 1)], SEED)
    assert night.steps(0)[0][:3].tolist() == [0, 6 * HOUR, 22 * HOUR]
    # 3 h at 0.5 x 2/s from 3:00 does 10800, then 1 h at 2/s: 7:00.
    assert night.finish_time(0, 3 * HOUR, 10800 + 7200, 2.0) == 7 * HOUR


def test_answers_do_not_depend_on_the_horizon():
    groups = [
        (MarkovSlowdown(0.5, 300, 60), 5),
        (DiurnalRate(0.4, 18, 23, timezone_spread_h=6, jitter_s=900), 5),
        (TraceRate([STEPS], period_s=45), 2),
    ]
    lazy = Rates(groups, SEED, initial_horizon_s=100)
    eager = Rates(groups, SEED, initial_horizon_s=4e5)
    queries = [(d, t0, amount) for d in range(12) for t0, amount in [(0, 5e4), (90, 3e4), (7e4, 2e6), (3e5, 1)]]
    lazy_answers = [(lazy.finish_time(d, t0, a, 10.0), lazy.factor_at(d, t0)) for d, t0, a in queries]
    assert lazy.horizon_s > 3e5
    assert lazy_answers == [(eager.finish_time(d, t0, a, 10.0), eager.factor_at(d, t0)) for d, t0, a in queries]
    for d in range(12):
        short_times, short_factors = Rates(groups, SEED, initial_horizon_s=500).steps(d)
        times, factors = eager.steps(d)
        assert np.array_equal(times[: len(short_times)], short_times)
        assert np.array_equal(factors[: len(short_factors)], short_factors)


@pytest.mark.parametrize(
    "build, expected",
    [
        (lambda: MarkovSlowdown(0, 10, 10), "factor must be"),
        (lambda: MarkovSlowdown(0.5, -1, 10), "mean_normal_s must be"),
        (lambda: MarkovSlowdown(0.5, 10, math.inf), "mean_slow_s must be"),
        (lambda: MarkovSlowdown(0.5, 10, 10, start="on"), "start must be"),
        (lambda: DiurnalRate(-0.5, 18, 23), "factor must be"),
        (lambda: DiurnalRate(0.5, 24, 23), "start_hour must be"),
        (lambda: DiurnalRate(0.5, 18, 18), "start_hour and end_hour must differ"),
        (lambda: DiurnalRate(0.5, 18, 23, jitter_s=-1), "jitter_s must be"),
        (lambda: TraceRate([]), "at least one trace"),
        (lambda: TraceRate([[(0, 1), (5, 1), (5, 2)]]), "traces[0] row 2: times must increase"),
        (lambda: TraceRate([[(1, 1)]]), "first time must be 0"),
        (lambda: TraceRate([[(0, 1), (3, float("nan"))]]), "factor must be > 0"),
        (lambda: TraceRate([STEPS], period_s=0), "period_s must be"),
        (lambda: TraceRate([STEPS], assignment="round-robin"), "assignment must be"),
    ],
)
def test_models_name_the_bad_field(build, expected):
    with pytest.raises(ValueError) as error:
        build()
    assert expected in str(error.value)


def test_queries_check_their_arguments():
    rates = one_device(TraceRate([STEPS]))
    with pytest.raises(IndexError):
        rates.factor_at(1, 0)
    for bad in [lambda: rates.finish_time(0, -1, 1, 1), lambda: rates.duration(0, 0, -1, 1),
                lambda: rates.finish_time(0, 0, 1, 0), lambda: rates.amount_done(0, 5, 4, 1)]:
        with pytest.raises(ValueError):
            bad()


def test_load_csv(tmp_path):
    path = write(tmp_path / "rates.csv", "device,t_s,factor\n7,0,1\n3,0,0.5\n7,10,0.25\n3,4,1\n")
    trace = load_rate_trace(path)
    # Ordered by id: trace 0 is device 3's, trace 1 is device 7's.
    assert [t.tolist() for t in trace.traces] == [[[0, 0.5], [4, 1]], [[0, 1], [10, 0.25]]]
    assert trace.period_s is None
    rates = Rates([(trace, 2)], SEED)
    assert rates.finish_time(1, 5.0, 1000.0, 100.0) == 30.0  # [5, 10) at 100/s: 500, then 500 at 25/s: 20 s


def test_load_json(tmp_path):
    document = {"period_s": 30, "traces": {"10": [[0, 1], [10, 0.5], [20, 2]], "2": [[0, 0.5]]}}
    trace = load_rate_trace(write(tmp_path / "rates.json", json.dumps(document)))
    assert [t.tolist() for t in trace.traces] == [[[0, 0.5]], [[0, 1], [10, 0.5], [20, 2]]]
    assert trace.period_s == 30.0
    assert Rates([(trace, 2)], SEED).finish_time(1, 55.0, 1500.0, 100.0) == 65.0
    no_period = load_rate_trace(write(tmp_path / "plain.json", json.dumps({"traces": {"0": [[0, 1]]}})))
    assert no_period.period_s is None


def bad_file(path):
    return one_line_error(ValueError, load_rate_trace, path)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("device,t_s,factor\n0,0,1\n0,10,0.5\n0,5,1\n", "line 4: device 0: times must increase, got 5 after 10"),
        ("device,t_s,factor\n0,0,1\n0,0,0.5\n", "line 3: device 0: times must increase"),
        ("device,t_s,factor\n0,0,1\n0,10,0\n", "line 3: device 0: factor must be > 0"),
        ("device,t_s,factor\n1,0,-0.5\n", "line 2: device 1: factor must be > 0"),
        ("device,t_s,factor\n0,0,nan\n", "line 2: device 0: factor must be > 0"),
        ("device,t_s,factor\n0,0,1\n2,5,1\n", "line 3: device 2: first time must be 0, got 5"),
        ("device,t_s\n0,0\n", "missing column factor"),
        ("device,t_s,factor\n0,0,1\nx,1,1\n", "line 3: expected an integer device"),
        ("device,t_s,factor\n0,0\n", "line 2: expected an integer device"),
        ("device,t_s,factor\n", "expected at least one row"),
        ("", "empty file"),
    ],
)
def test_malformed_csv(tmp_path, text, expected):
    assert expected in bad_file(write(tmp_path / "rates.csv", text))


@pytest.mark.parametrize(
    "document, expected",
    [
        ({"traces": {"0": [[0, 1], [5, 1], [2, 1]]}}, "trace 0 row 2: times must increase"),
        ({"traces": {"0": [[0, 0]]}}, "trace 0 row 0: factor must be > 0"),
        ({"traces": {"4": [[5, 1]]}}, "trace 4 row 0: first time must be 0"),
        ({"traces": {"0": [[0, 1, 2]]}}, "trace 0: expected a non-empty list of [t_s, factor] rows"),
        ({"traces": {"a": [[0, 1]]}}, "trace id 'a' must be an integer"),
        ({"traces": {}}, "with at least one trace"),
        ({"period": 5, "traces": {"0": [[0, 1]]}}, "unexpected key 'period'"),
        ({"period_s": -5, "traces": {"0": [[0, 1]]}}, "period_s must be"),
    ],
)
def test_malformed_json(tmp_path, document, expected):
    assert expected in bad_file(write(tmp_path / "rates.json", json.dumps(document)))


def test_not_json_and_missing_file(tmp_path):
    assert "expected JSON" in bad_file(write(tmp_path / "rates.json", "{nope"))
    with pytest.raises(FileNotFoundError):
        load_rate_trace(tmp_path / "absent.csv")


def test_example_trace_loads():
    from pathlib import Path

    path = Path(__file__).parents[2] / "scenarios" / "studies" / "throttle_trace.csv"
    trace = load_rate_trace(path)
    assert len(trace.traces) == 20
    assert all(0.4 <= t[:, 1].min() and t[:, 1].max() == 1 for t in trace.traces)
    assert path.stat().st_size < 50_000
