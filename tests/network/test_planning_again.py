"""Planner.contended asks the availability again only for the tasks the shared links made last longer: the same
answers as asking every device again, also where asking re-samples the fleet at a doubled horizon."""
from types import SimpleNamespace

import numpy as np

from devices import Availability, MarkovOnOff
from testbed.protocols.planning import Planner

SEED = np.random.SeedSequence(45)


def test_asking_the_grown_again_answers_as_asking_all():
    groups = [(MarkovOnOff(100, 300), 40)]
    resampled = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        mine, reference = (Availability(groups, SEED, initial_horizon_s=600.0) for _ in range(2))
        ids = rng.choice(40, 30, replace=False)
        t0 = float(rng.uniform(300, 590))
        need = t0 + rng.uniform(0, 599 - t0, 30)   # within the horizon: a device online past it gets the horizon
        until = mine.online_until_each(ids, t0, need)
        reference.online_until_each(ids, t0, need)
        grew = rng.random(30) < 0.3
        need = np.where(grew, need + rng.uniform(0, 1500, 30), need)
        horizon = mine.horizon_s
        planner = SimpleNamespace(fleet=SimpleNamespace(availability=mine))
        again = Planner._online_until_again(planner, ids, t0, need, until, grew)
        resampled += mine.horizon_s != horizon
        assert np.array_equal(again, reference.online_until_each(ids, t0, need))
    assert 0 < resampled < 40   # both ways: the grown alone, and the fall-back to asking all


def test_answers_a_larger_need_cannot_change_are_not_asked_again():
    # needs that grow but stay under the horizon: every answer is final, or the horizon as a bound that holds
    groups = [(MarkovOnOff(400, 300), 40)]
    mine, reference = (Availability(groups, SEED, initial_horizon_s=600.0) for _ in range(2))
    ids, t0 = np.arange(30), 350.0
    need = np.full(30, 400.0)
    until = mine.online_until_each(ids, t0, need)
    assert (until == mine.horizon_s).any() and (until < mine.horizon_s).any()   # both kinds of answer
    grown = np.full(30, 590.0)
    assert not mine.may_change(until, grown).any()
    asked = []
    mine.online_until_each = lambda *args: asked.append(args)
    planner = SimpleNamespace(fleet=SimpleNamespace(availability=mine))
    again = Planner._online_until_again(planner, ids, t0, grown, until, np.ones(30, dtype=bool))
    assert not asked and np.array_equal(again, reference.online_until_each(ids, t0, grown))
    # a need that reaches the horizon may move a bounded answer: those are asked
    assert np.array_equal(mine.may_change(until, np.full(30, 600.0)), until == 600.0)
    for needs in (grown, np.full(30, 600.0)):   # the planner's list form: the same answers
        assert mine.may_change_list(until.tolist(), needs.tolist()) == mine.may_change(until, needs).tolist()
