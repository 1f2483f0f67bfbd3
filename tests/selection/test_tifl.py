"""TiFL (testbed/selection/tifl.py): tiers and the adaptive probabilities by hand, one selection by hand, the
credits bounding each tier's rounds, and on fedprox_deadline rounds of devices alike in speed."""
import numpy as np
import pytest
from selection_runs import (deadline_raw, registry_of, resume_keeps_the_tables, run_deadline,
                            selected_by_round)
from helpers import ROOT

from testbed import scenario as sc
from testbed.errors import TestbedError
from testbed.selection import History, Outcome, Registry, SelectionContext, TiFL
from testbed.selection.tifl import TiFLState, cut_tiers, ranked_probabilities


def registry(task_s) -> Registry:
    n = len(task_s)
    return Registry(np.ones(n), np.ones(n), np.ones(n), np.zeros(n), np.full(n, 10), np.asarray(task_s, float))


def context(reg: Registry, candidates, n_select: int, round: int = 1) -> SelectionContext:
    candidates = np.asarray(candidates)
    return SelectionContext(round, 0.0, n_select, reg, History.empty(reg.n), lambda: candidates,
                            lambda d: d in candidates, deadline_s=None)


def bound(reg: Registry, rounds: int = 10, **options) -> tuple[TiFL, TiFLState]:
    selector = TiFL(**options)
    return selector, selector.init(reg, rounds, 2)


def test_tiers_are_latency_quantiles_fastest_first():
    """7 devices, 3 tiers: latency order 6 (0.5 s), 1, 3, 4, 2, 0, 5 (6 s) cut 3, 2, 2 (ties by id)."""
    tiers = cut_tiers(np.array([5, 1, 4, 2, 3, 6, 0.5]), 3)
    assert [t.tolist() for t in tiers] == [[6, 1, 3], [4, 2], [0, 5]]
    assert [t.tolist() for t in cut_tiers(np.array([2.0, 1, 2, 1]), 2)] == [[1, 3], [0, 2]]


def test_adaptive_probabilities_favour_the_least_accurate_tiers_with_credits():
    """Tiers with credits 0, 1, 3 (n = 3, D = 6) by accuracy 0.5 (tier 1), 0.7 (tier 3), 0.8 (tier 0): 3/6, 2/6,
    1/6; tier 2 has no credits left: 0."""
    probs = ranked_probabilities(np.array([0.8, 0.5, 0.9, 0.7]), np.array([1, 1, 0, 1]))
    assert probs.tolist() == pytest.approx([1 / 6, 3 / 6, 0, 2 / 6])


def test_one_selection_by_hand():
    """task_s 1..6 s in 3 tiers: {0, 1}, {2, 3}, {4, 5}. The static policy picks the middle tier; device 3 is not
    usable, so device 2 is taken and the round topped up from the faster neighbour {0, 1}, uniformly."""
    reg = registry([1, 2, 3, 4, 5, 6])
    seen = {0: 0, 1: 0}
    for seed in range(200):
        selector, state = bound(reg, tiers=3, policy="static", probabilities=[0, 1, 0])
        picked = selector.select(state, context(reg, [0, 1, 2, 4, 5], 2), np.random.default_rng(seed))[0].tolist()
        assert picked[1] == 2 and picked[0] in seen
        seen[picked[0]] += 1
    assert 80 < seen[0] < 120   # each half of the time: binomial(200, 1/2), 4 standard deviations out
    # three asked of a tier of one: the faster neighbour's two, then none of the slower tier's
    selector, state = bound(reg, tiers=3, policy="static", probabilities=[0, 1, 0])
    picked, _ = selector.select(state, context(reg, [0, 1, 2, 4, 5], 3), np.random.default_rng(0))
    assert picked.tolist() == [0, 1, 2]


def test_credits_bound_each_tiers_rounds_and_the_probabilities_follow_accuracy():
    """2 tiers {0, 1} and {2, 3}, 6 rounds: 3 credits a tier, so whatever the draws each tier is chosen 3 times;
    at round 3 (interval 2: after rounds 1 and 2) the tier whose devices reported the lower training accuracy
    gets 2/3, the other 1/3."""
    reg = registry([1, 2, 3, 4])
    for seed in range(10):
        (selector, state), rng, chosen = bound(reg, rounds=6, tiers=2, interval=2), np.random.default_rng(seed), []
        for r in range(1, 7):
            picked, state = selector.select(state, context(reg, range(4), 2, round=r), rng)
            chosen.append(int(picked[0] >= 2))
            if r == 1:
                assert state.tier_probs.tolist() == [0.5, 0.5]
                reports, history = [Outcome(0, 1, "arrived", 0, 1, {"train_accuracy": 0.9}),
                                    Outcome(2, 1, "arrived", 0, 3, {"train_accuracy": 0.4})], History.empty(4)
                history.record(reports)   # timed as declared: the tiers stay
                state = selector.observe(state, 1, 3.0, reports, history)
            if r == 3:
                assert state.tier_probs.tolist() == pytest.approx([1 / 3, 2 / 3])
        assert sorted(chosen) == [0, 0, 0, 1, 1, 1]
        assert state.tier_credits.tolist() == [0, 0]


def test_measured_latencies_re_tier_the_devices():
    """Device 0 declared 1 s and took 10: it joins the slow tier; device 3, cut after 2 s of its declared 4 s,
    keeps 4; device 1, cut after 7 s, is at least that slow."""
    reg = registry([1, 2, 3, 4])
    (selector, before), history = bound(reg, tiers=2), History.empty(4)
    outcomes = [Outcome(0, 1, "arrived", 0, 10), Outcome(3, 1, "cut", 0, 2), Outcome(1, 1, "cut", 0, 7)]
    history.record(outcomes)
    state = selector.observe(before, 1, 10.0, outcomes, history)
    assert state.latency_s.tolist() == [10, 7, 3, 4] and before.latency_s.tolist() == [1, 2, 3, 4]
    assert [t.tolist() for t in cut_tiers(state.latency_s, 2)] == [[2, 3], [1, 0]]


def test_options_are_checked_and_asynchronous_dispatch_refused_in_one_line():
    for bad in ({"tiers": 0}, {"interval": 0}, {"credits": 0}, {"probabilities": [0.5, 0.5]},
                {"tiers": 2, "probabilities": [0.7, 0.7]}):
        with pytest.raises(ValueError):
            TiFL(**bad)
    with pytest.raises(TestbedError, match="selection.options.policy"):
        sc.load(ROOT / "scenarios" / "fedprox_deadline.yaml", ["selection.name=tifl", "selection.options.policy=x"])
    with pytest.raises(TestbedError, match="selection: 'tifl' picks a synchronous round's participants") as err:
        sc.load(ROOT / "scenarios" / "fedbuff.yaml", ["selection.name=tifl"])
    assert "\n" not in str(err.value)


def test_it_sees_the_declared_figures_not_the_hidden_tiers_nor_the_availability():
    """Capability tiers and another availability change what devices deliver, not what they declare: with the
    same history TiFL's picks stay the same."""
    hidden = ["fleet.groups.3.tiers=[1, 0.0625]", "fleet.groups.0.availability.kind=markov",
              "fleet.groups.0.availability.mean_on_s=10", "fleet.groups.0.availability.mean_off_s=10"]
    picks = []
    for reg in (registry_of(deadline_raw()), registry_of(deadline_raw(*hidden))):
        selector, state = bound(reg, rounds=20)
        picks.append([selector.select(state, context(reg, np.arange(100), 10, r), np.random.default_rng(r))[0]
                      for r in range(1, 4)])
    assert all(np.array_equal(a, b) for a, b in zip(*picks))


def spread(events, task_s) -> float:
    """The mean over rounds of the spread (slowest - fastest declared task time) of a round's devices."""
    return float(np.mean([np.ptp(task_s[d]) for d in selected_by_round(events).values()]))


@pytest.mark.slow
def test_rounds_of_devices_alike_in_speed_on_fedprox_deadline(uniform_deadline_run):
    """Measured over 3 rounds: uniform's rounds mix Jetsons (0.4 s declared) with low-end phones (16 s), a spread
    of 15.5, 4.5 and 15.5 s; TiFL's each draw one tier of 20 (5 tiers of 100): the mid phones (0.15 s), the slower
    Raspberry Pis with mid phones (3.8 s), the low-end phones topped up with 2 mid phones where only 8 are online
    (11.8 s). The slowest tier's round is TiFL's cost against a deadline: 8 of its 10 are late at 10 s."""
    task_s = registry_of(deadline_raw()).task_s
    _, uniform = uniform_deadline_run
    rounds, events = run_deadline("tifl")
    assert spread(uniform, task_s) == pytest.approx((15.485 + 4.466 + 15.516) / 3, abs=0.01)
    assert spread(events, task_s) == pytest.approx((0.152 + 3.837 + 11.761) / 3, abs=0.01)
    assert (rounds.selected == 10).all() and rounds.late.tolist() == [0, 0, 8]
    order = np.argsort(np.argsort(task_s, kind="stable"), kind="stable")   # each device's rank by latency
    for picked in selected_by_round(events).values():   # within one tier, or it and a neighbour topping it up
        assert np.ptp(order[picked] // 20) <= 1


def test_a_resumed_run_gives_the_tables_of_an_unbroken_one(tmp_path):
    """4 rounds of adaptive TiFL killed after round 2: round 3 re-ranks the tiers from what the checkpoint kept
    (reported accuracies, credits, latencies)."""
    assert resume_keeps_the_tables({"name": "tifl", "options": {"tiers": 2, "interval": 2}},
                                   {"clients_per_round": 3}, tmp_path)
