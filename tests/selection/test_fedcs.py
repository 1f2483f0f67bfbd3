"""FedCS (testbed/selection/fedcs.py): the paper's greedy by hand on 4 made-up devices, the request step, the
deadline it needs, and on fedprox_deadline fewer late devices than uniform selection."""
import math

import numpy as np
import pytest
from selection_runs import (deadline_raw, registry_of, resume_keeps_the_tables, run_deadline,
                            selected_by_round)
from helpers import ROOT, tiny_scenario

from testbed import scenario as sc
from testbed.errors import TestbedError
from testbed.selection import FedCS, History, Registry, SelectionContext
from testbed.selection.fedcs import greedy_schedule

# 4 devices, latency 0, payloads of 100 B: download 1, 1, 2, 1 s; update 2, 1, 4, 8 s; upload 2, 1, 1, 4 s
FOUR = Registry(flops_per_s=np.full(4, 10.0), down_Bps=np.array([100.0, 100, 50, 100]),
                up_Bps=np.array([50.0, 100, 100, 25]), latency_s=np.zeros(4), num_samples=np.full(4, 10),
                task_s=np.array([5.0, 3, 7, 13]), bytes_down=100.0, bytes_up=100.0,
                train_flops=np.array([20.0, 10, 40, 80]))


def context(registry: Registry, candidates, n_select: int, deadline_s: float | None = None) -> SelectionContext:
    candidates = np.asarray(candidates)
    return SelectionContext(1, 0.0, n_select, registry, History.empty(registry.n), lambda: candidates,
                            lambda d: d in candidates, deadline_s=deadline_s)


def round_time(order, down_s, update_s, up_s) -> float:
    """The round of `order` played out: each upload starts when the channel is free and its update done."""
    channel_free = 0.0
    for k in order:
        channel_free = max(channel_free, update_s[k]) + up_s[k]
    return max(down_s[k] for k in order) + channel_free


def test_the_phases_are_the_registry_task_time_apart():
    assert [p.tolist() for p in FOUR.phases_s()] == [[1, 1, 2, 1], [2, 1, 4, 8], [2, 1, 1, 4]]
    assert np.array_equal(sum(FOUR.phases_s()), FOUR.task_s)
    real = registry_of(deadline_raw())  # the run's own registry: its phases add up to its task time
    assert np.allclose(sum(real.phases_s()), real.task_s, rtol=1e-12)


def test_the_greedy_adds_the_device_that_lengthens_the_round_least_while_it_fits():
    """By hand, Θ = 0: growths (upload + max(0, update - Θ)) 4, 2, 5, 12: device 1 (Θ 2, round 1 + 2 = 3);
    then 2, 3, 10: device 0 (Θ 4, round 5); then device 2 grows it by 1 + max(0, 4 - 4) = 1 (Θ 5, its 2 s
    download: round 7); device 3 would make Θ 5 + 4 + 3 = 12, round 14 > 8: left out."""
    phases = FOUR.phases_s()
    assert greedy_schedule(np.arange(4), *phases, deadline_s=8, most=10) == [1, 0, 2]
    assert round_time([1, 0, 2], *phases) == 7 and round_time([1, 0, 2, 3], *phases) == 14
    assert greedy_schedule(np.arange(4), *phases, deadline_s=8, most=2) == [1, 0]   # n_select caps it
    # at 6.9 s device 2 (round 7) and device 3 (Θ 4 + 4 + 4 = 12) do not fit
    assert greedy_schedule(np.arange(4), *phases, deadline_s=6.9, most=10) == [1, 0]
    assert greedy_schedule(np.arange(4), *phases, deadline_s=2.9, most=10) == []   # not even the fastest
    # the selector: every candidate asked, the round's deadline by default, an option over it
    rng = np.random.default_rng(0)
    assert FedCS(request_fraction=1.0).select(None, context(FOUR, range(4), 10, 8.0), rng)[0].tolist() == [0, 1, 2]
    over = FedCS(request_fraction=1.0, deadline_s=14).select(None, context(FOUR, range(4), 10, 8.0), rng)[0]
    assert over.tolist() == [0, 1, 2, 3]


def test_it_picks_among_the_candidates_it_asked():
    """ceil(0.5 x 4) = 2 asked, drawn with the selection stream; what it picks is among them."""
    for seed in range(20):
        asked = set(np.random.default_rng(seed).choice(np.arange(4), 2, replace=False).tolist())
        picked, _ = FedCS(request_fraction=0.5).select(None, context(FOUR, range(4), 10, 100.0),
                                                       np.random.default_rng(seed))
        assert set(picked.tolist()) == asked   # a 100 s deadline: all asked fit
    picked, _ = FedCS(request_fraction=0.3).select(None, context(FOUR, [0, 2, 3], 10, 100.0),
                                                   np.random.default_rng(0))
    assert len(picked) == math.ceil(0.3 * 3) and picked[0] in (0, 2, 3)


def test_options_and_the_deadline_it_needs_are_checked_in_one_line():
    with pytest.raises(ValueError, match="request_fraction"):
        FedCS(request_fraction=0.0)
    raw = tiny_scenario({"name": "fedavg"}) | {"selection": {"name": "fedcs"}}
    with pytest.raises(TestbedError, match="selection: 'fedcs' picks devices that fit a round deadline") as err:
        sc.validate(raw, "test", ROOT)
    assert "\n" not in str(err.value)
    sc.validate(raw | {"selection": {"name": "fedcs", "options": {"deadline_s": 5}}}, "test", ROOT)
    with pytest.raises(TestbedError, match="deadline_s must be positive"):
        sc.validate(raw | {"selection": {"name": "fedcs", "options": {"deadline_s": -1}}}, "test", ROOT)


def test_asynchronous_dispatch_is_refused_in_one_line():
    with pytest.raises(TestbedError, match="selection: 'fedcs' picks a synchronous round's participants") as err:
        sc.load(ROOT / "scenarios" / "fedbuff.yaml", ["selection.name=fedcs", "selection.options.deadline_s=10"])
    assert "\n" not in str(err.value)


def test_it_sees_the_declared_figures_not_the_hidden_tiers_nor_the_availability():
    """Capability tiers and another availability change what devices deliver, not what they declare: the
    registry, and so FedCS's picks, stay the same."""
    hidden = ["fleet.groups.3.tiers=[1, 0.0625]", "fleet.groups.0.availability.kind=markov",
              "fleet.groups.0.availability.mean_on_s=10", "fleet.groups.0.availability.mean_off_s=10"]
    plain, varied = registry_of(deadline_raw()), registry_of(deadline_raw(*hidden))
    picks = [FedCS().select(None, context(r, np.arange(100), 10, 10.0), np.random.default_rng(3))[0]
             for r in (plain, varied)]
    assert np.array_equal(*picks) and len(picks[0]) > 0


@pytest.mark.slow
def test_fewer_late_devices_than_uniform_on_fedprox_deadline(uniform_deadline_run):
    """Measured over 3 rounds at a 10 s deadline: uniform's picks include low-end phones whose ~12 s uploads
    miss it (2 late here); FedCS asks 10% of the candidates and keeps those whose uploads, one after another,
    fit: none late (its estimates are the devices' declared figures, which this fleet delivers exactly)."""
    uniform, _ = uniform_deadline_run
    fedcs, events = run_deadline("fedcs")
    assert uniform.late.sum() == 2 and fedcs.late.sum() == 0
    assert (fedcs.selected <= 10).all() and (fedcs.arrived == fedcs.selected).all()
    phases = registry_of(deadline_raw()).phases_s()
    for picked in selected_by_round(events).values():   # each round's set fits by the paper's formula, its
        # uploads in the order their updates end (the shortest schedule of a set: no order fits where it fails)
        assert round_time(sorted(picked, key=lambda k: phases[1][k]), *phases) <= 10


def test_devices_slower_than_they_declare_miss_the_deadline():
    """FedCS's own failure mode, measured: the Jetsons run at 1/1000 of their declared FLOP/s (a hidden capability
    tier), FedCS still trusts their declared figures and picks them, and they are late: 1, 4 and 4 of its 6, 7
    and 7 picks over the 3 rounds."""
    rounds, _ = run_deadline("fedcs", "fleet.groups.3.tiers=[0.001]")
    assert rounds.late.tolist() == [1, 4, 4] and rounds.selected.tolist() == [6, 7, 7]


def test_a_resumed_run_gives_the_tables_of_an_unbroken_one(tmp_path):
    """FedCS keeps no state of its own; the selection stream it draws the request from must come back."""
    assert resume_keeps_the_tables({"name": "fedcs", "options": {"request_fraction": 0.5}},
                                   {"clients_per_round": 3, "deadline_s": 20}, tmp_path)


def test_the_heap_greedy_is_the_papers_scan():
    """greedy_schedule's heaps against Algorithm 2 written as a plain scan (every requested client's growth at
    each step, the first minimum taken), on 2,000 random instances with many ties."""
    def scan(requested, down_s, update_s, up_s, deadline_s, most):
        left, chosen, theta, slowest_down = list(requested), [], 0.0, 0.0
        while left and len(chosen) < most:
            growth = [up_s[k] + max(0.0, update_s[k] - theta) for k in left]
            x = left.pop(int(np.argmin(growth)))
            theta_x = theta + up_s[x] + max(0.0, update_s[x] - theta)
            if max(slowest_down, down_s[x]) + theta_x <= deadline_s:
                chosen.append(int(x))
                theta, slowest_down = theta_x, max(slowest_down, down_s[x])
        return chosen

    rng = np.random.default_rng(0)
    for _ in range(2000):
        n, m = int(rng.integers(1, 40)), 60
        down, up = rng.random(m), rng.integers(1, 4, m) * 0.25
        update = rng.integers(0, 5, m) * rng.choice([1.0, 0.5])
        requested = np.sort(rng.choice(m, n, replace=False))
        deadline, most = float(rng.uniform(0, 15)), int(rng.integers(1, n + 1))
        assert greedy_schedule(requested, down, update, up, deadline, most) == \
            scan(requested, down, update, up, deadline, most)
