"""Availability-aware selection (REFL's idea): the rule by hand, what it learns from the server's looks, that it
reads no ground truth, fewer drops than uniform where its premise holds, a resume, and async dispatch."""
import copy

import numpy as np
import pandas as pd
import pytest
from helpers import TWO_DEVICES, run_killed_after, simulate, tiny_blobs, tiny_scenario

import testbed.data
from testbed import scenario as sc
from testbed.runner import run_scenario
from testbed.selection import Availability, History, Registry, SelectionContext


def _context(history, task_s, n_select):
    n = len(task_s)
    registry = Registry(*(np.ones(n) for _ in range(4)), np.ones(n, dtype=np.int64), np.array(task_s, dtype=float))
    candidates = np.arange(n)
    return SelectionContext(2, 0.0, n_select, registry, history, lambda: candidates, lambda d: True)


def _history(seen_online, dropped, checks):
    history = History.empty(len(seen_online))
    history.seen_online[:], history.dropped[:], history.checks = seen_online, dropped, checks
    history.online_since_s[:] = 0.0  # all online now
    return history


def test_the_rule_by_hand():
    """task_s 6, 6, 30, 3 s; device 3 dropped once; no look learnt yet, so lambda = (dropped + 1) / 60:
    p = exp(-6/60) = 0.905, 0.905, exp(-30/60) = 0.607, exp(-2 x 3/60) = 0.905: devices 0, 1, 3 likely (>= 0.9).
    Availability (seen_online + 1) / (4 + 2) = 5/6, 2/6, 3/6, 4/6: likely ones least available first, 1, 3, 0;
    then device 2."""
    history = _history([4, 1, 2, 3], [0, 0, 0, 1], checks=4)
    rng = np.random.default_rng(0)
    ctx = _context(history, [6, 6, 30, 3], 3)
    selector = Availability()
    fresh = selector.init(ctx.registry, 10, 3)
    np.testing.assert_allclose(selector.p_stay(fresh, ctx), np.exp([-0.1, -0.1, -0.5, -0.1]))
    assert selector.select(fresh, _context(history, [6, 6, 30, 3], 2), rng)[0].tolist() == [1, 3]
    assert selector.select(fresh, _context(history, [6, 6, 30, 3], 3), rng)[0].tolist() == [0, 1, 3]
    # device 0's measured tasks took 40 s on average: p = exp(-40/60) = 0.51 < device 2's 0.61, both unlikely
    history.arrived[0], history.duration_sum_s[0] = 2, 80.0
    assert selector.select(fresh, _context(history, [6, 6, 30, 3], 3), rng)[0].tolist() == [1, 2, 3]


def test_it_learns_departures_and_time_online_from_the_looks():
    """Looks at t = 0 (all three online) and t = 10: device 0 still online (10 s online), device 1 gone (a
    departure, 5 s online), device 2 gone having dropped its task (the drop is its one departure, 5 s online)."""
    history = History.empty(3)
    selector = Availability()
    ctx = _context(history, [60.0, 60.0, 60.0], 1)
    history.looked(np.array([True, True, True]), 0.0)
    state = selector.watch(selector.init(ctx.registry, 10, 1), history, 0.0)
    history.dropped[2] = 1
    history.looked(np.array([True, False, False]), 10.0)
    before = state
    state = selector.watch(state, history, 10.0)
    assert state.departures.tolist() == [0, 1, 0] and state.online_s.tolist() == [10.0, 5.0, 5.0]
    assert before.online_s.tolist() == [0.0, 0.0, 0.0] and before.looks == 1   # the state given is left as it was
    np.testing.assert_allclose(selector.p_stay(state, ctx), np.exp([-60 / 70, -2 * 60 / 65, -2 * 60 / 65]))
    assert selector.watch(state, history, 10.0) is state  # no new look: nothing learnt twice


def test_options_are_checked():
    with pytest.raises(ValueError, match="min_p"):
        Availability(min_p=1.5)
    with pytest.raises(ValueError, match="prior_session_s"):
        Availability(prior_session_s=0.0)


def _premise(selection: str, rounds: int, seed: int) -> dict:
    """Devices 0-9 online often but in short sessions (20 s on, 5 s off), 10-19 rarely but long (300 s on,
    600 s off); a task takes about 10 s (latency 5 s each way)."""
    raw = tiny_scenario({"name": "fedavg"}, rounds=rounds) | {"seed": seed, "selection": {"name": selection}}
    raw["fleet"] = {"groups": [
        {"profile": "raspberry_pi_4", "count": 10, "latency_s": 5,
         "availability": {"kind": "markov", "mean_on_s": 20, "mean_off_s": 5}},
        {"profile": "raspberry_pi_4", "count": 10, "latency_s": 5,
         "availability": {"kind": "markov", "mean_on_s": 300, "mean_off_s": 600}}]}
    raw["round"] = {"clients_per_round": 4}
    return raw


@pytest.mark.slow
def test_fewer_drops_than_uniform_where_its_premise_holds(monkeypatch):
    """Measured, 10 rounds, seeds 0 and 1: uniform drops 8 + 15 tasks, availability 7 + 9; it gives the rarely
    online, long-session devices 10-19 more of the tasks."""
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    drops, long_sessions = {}, {}
    for selection in ("uniform", "availability"):
        drops[selection], long_sessions[selection] = 0, 0
        for seed in (0, 1):
            records, events = simulate(_premise(selection, 10, seed))
            drops[selection] += sum(r["dropped"] for r in records)
            downloads = pd.DataFrame(events).query("phase == 'download'")
            long_sessions[selection] += int((downloads["device"] >= 10).sum())
    assert drops["availability"] < drops["uniform"]
    assert long_sessions["availability"] > long_sessions["uniform"]


@pytest.mark.parametrize("selection", [{"name": "availability"}, {"name": "power_of_choice"},
                                       {"name": "power_of_choice", "options": {"loss": "reported"}}])
def test_it_reads_no_ground_truth(selection, tmp_path, monkeypatch):
    """Two fleets whose availability differs only after t = 1000 (devices 1 and 3 away over [1000, 2000) in one):
    the first rounds, over well before t = 1000, see the same history and pick alike (power_of_choice here too)."""
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    always, later = tmp_path / "always.csv", tmp_path / "later.csv"
    always.write_text("device,start_s,end_s\na,0,1e9\n")
    later.write_text("device,start_s,end_s\na,0,1000\na,2000,1e9\n")

    def run(trace):
        raw = tiny_scenario({"name": "fedavg"}, rounds=3) | {"selection": selection}
        raw["fleet"] = {"groups": copy.deepcopy(TWO_DEVICES["fleet"]["groups"] * 2)}
        for group in raw["fleet"]["groups"][1::2]:
            group["availability"] = {"kind": "trace", "file": str(trace)}
        raw["round"] = {"clients_per_round": 2}
        records, events = simulate(raw)
        assert records[-1]["t_end_s"] < 1000
        return [(e["round"], e["device"], e["outcome"]) for e in events if e["phase"] == "download"]

    assert run(always) == run(later)


def test_a_resumed_run_gives_the_tables_of_an_unbroken_run(tmp_path, monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    raw = _premise("availability", 6, 0) | {"checkpoint": {"every_rounds": 2}}
    reference, _ = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "unbroken", quiet=True)
    run_killed_after(raw, tmp_path / "broken", 3)
    run, _ = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "broken", quiet=True, resume=True)
    for table in ("rounds.csv", "events.csv"):
        assert (run / table).read_bytes() == (reference / table).read_bytes()


@pytest.mark.parametrize("selection", [{"name": "availability"},
                                       {"name": "power_of_choice", "options": {"loss": "reported"}}])
def test_asynchronous_dispatch(selection, monkeypatch):
    """Both pick for async dispatch: every task goes to a distinct idle device, and the run aggregates."""
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    raw = _premise("uniform", 4, 0) | {"selection": selection}
    raw = {k: v for k, v in raw.items() if k != "round"}
    raw["protocol"] = {"kind": "async", "concurrency": 4, "buffer_size": 2}
    records, events = simulate(raw)
    assert len(records) == 4 and all(r["arrived"] == 2 for r in records)
    downloads = pd.DataFrame(events).query("phase == 'download'")
    assert len(downloads) >= 8
