"""Oort (testbed/selection/oort.py): its utility, score and one selection by hand on a four-device context, epsilon's
decay, the pacer moving T, the blacklist; end to end, it picks faster devices than uniform selection, resumes from
a checkpoint to the tables of an unbroken run, and never reads the simulator's ground truth."""
import copy
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from helpers import ROOT, TWO_DEVICES, run_killed_after, simulate, tiny_blobs
from selection_runs import older_checkpoint

import testbed.data
from testbed import scenario as sc
from testbed.protocols.kit import Kit
from testbed.runner import run_scenario
from testbed.selection import History, Oort, Outcome, Registry, SelectionContext
from testbed.selection.oort import OortState, draw


def registry(samples, task_s) -> Registry:
    n = len(samples)
    return Registry(np.ones(n), np.ones(n), np.ones(n), np.zeros(n), np.array(samples), np.array(task_s, float))


def context(reg: Registry, history: History, round: int, n_select: int, candidates=None, asynchronous=False):
    ids = np.arange(reg.n) if candidates is None else np.array(candidates)
    return SelectionContext(round, 0.0, n_select, reg, history, lambda: ids, lambda d: d in ids,
                            asynchronous=asynchronous)


def four_devices(**options) -> tuple[Registry, History, Oort, OortState]:
    """Devices 0-2 tried before, 3 never. Utilities |B| x RMS loss: 10 x 1, 20 x 2, 30 x 1 = 10, 40, 30; durations
    measured 1 and 3 s; device 2 never arrived, its last task cut after 6 s (registered 4 s); device 3 registered
    8 s. T = the 30th percentile of [1, 3, 6, 8]: sorted[int(4 x 0.3)] = 3."""
    reg = registry([10, 20, 30, 40], [1.0, 2.0, 4.0, 8.0])
    history = History.empty(4)
    history.selected[:3] = [2, 1, 1]
    history.last_selected[:3] = [4, 2, 4]
    history.loss_sq[:3] = [1.0, 2.0, 1.0]
    history.duration_s[:2] = [1.0, 3.0]
    oort = Oort(clip_bound=0.5, **options)
    state = oort.observe(oort.init(reg, rounds=10, clients_per_round=2), 4, 0.0, [Outcome(2, 4, "cut", 10.0, 16.0)],
                         history)
    return reg, history, oort, state


# by hand: utilities sorted [10, 30, 40]; clip at sorted[int(3 x 0.5)] = 30; low = 0.999 x 10; spread = 40 - 9.99;
# temporal sqrt(0.1 ln 5 / last round); device 2's duration 6 > T = 3: factor (3 / 6)^2
S0 = (10 - 9.99) / 30.01 + math.sqrt(0.1 * math.log(5) / 4)
S1 = (30 - 9.99) / 30.01 + math.sqrt(0.1 * math.log(5) / 2)
S2 = ((30 - 9.99) / 30.01 + math.sqrt(0.1 * math.log(5) / 4)) * (3 / 6) ** 2


def test_utility_durations_and_scores_by_hand():
    reg, history, oort, state = four_devices()
    durations = oort.durations(state, reg, history)
    assert durations.tolist() == [1.0, 3.0, 6.0, 8.0]
    assert oort.preferred(state, durations) == 3.0
    factor = oort.system_factor(durations, 3.0)
    assert factor.tolist() == [1.0, 1.0, 0.25, (3 / 8) ** 2]
    assert oort.utilities(state, np.arange(3), history).tolist() == [10.0, 40.0, 30.0]
    assert oort.scores(state, np.arange(3), 5, history, factor) == pytest.approx([S0, S1, S2], rel=1e-12)
    # a device tried but that never reported a loss counts as the mean of those that did
    history.loss_sq[2] = math.nan
    assert oort.utilities(state, np.arange(3), history).tolist() == [10.0, 40.0, 25.0]
    # FedScale's |B| = min(samples, local_steps x batch_size)
    capped = Oort(samples_cap=15)
    assert capped.utilities(capped.init(reg, 10, 2), np.arange(2), history).tolist() == [10.0, 30.0]


def test_one_selection_by_hand():
    """Round 5 after 4 rounds observed: epsilon = 0.9 x 0.98^5 = 0.8135, int(2 x 0.8135) = 1 slot explores (device 3,
    the only one never tried), 1 exploits. cut_off_util = 1 keeps the scores at least the second best's: devices 1
    and 2 (S0 < S2), drawn by score."""
    reg, history, oort, state = four_devices(cut_off_util=1.0, exploit_pool=0.0)
    for r in range(1, 4):
        state = oort.observe(state, r, 0.0, [], history)
    assert state.aggregations == 4 and oort.epsilon(state) == pytest.approx(0.9 * 0.98 ** 5)
    picked, after = oort.select(state, context(reg, history, 5, 2), np.random.default_rng(7))
    exploit = np.random.default_rng(7).choice([1, 2], 1, replace=False, p=np.array([S1, S2]) / (S1 + S2))
    assert sorted(picked.tolist()) == sorted([int(exploit[0]), 3]) and after.exploiting == [int(exploit[0])]
    assert state.exploiting == []   # the state given is left as it was
    # over many draws device 1 comes S1 / (S1 + S2) = 0.814 of the time
    rng = np.random.default_rng(0)
    ones = sum(1 in oort.select(state, context(reg, history, 5, 2), rng)[0] for _ in range(1000))
    assert ones / 1000 == pytest.approx(S1 / (S1 + S2), abs=0.04)   # 3.3 standard deviations


def test_exploration_ranks_by_size_times_speed_and_fills_what_exploitation_cannot():
    """Nothing tried: every slot explores, among the int(5 x 2) = 10 heaviest |B| x factor; with sample_window 1 only
    the two heaviest. T = sorted[int(6 x 0.3)] = 2 s, so the weights are 10, 20, 30 x (2/3)^2, 40 x (2/3)^2,
    50 x (2/3)^2, 80 x (2/100)^2 = 10, 20, 13.3, 17.8, 22.2, 0.03: devices 4 and 1."""
    reg = registry([10, 20, 30, 40, 50, 80], [1, 2, 3, 3, 3, 100])
    oort = Oort(sample_window=1.0)
    state = oort.init(reg, 10, 2)
    picked, state = oort.select(state, context(reg, History.empty(6), 1, 2), np.random.default_rng(0))
    assert sorted(picked.tolist()) == [1, 4] and state.exploiting == []
    # all tried, epsilon high: exploration has nobody left, so exploitation takes every slot
    history = History.empty(6)
    history.selected[:] = history.last_selected[:] = 1
    history.loss_sq[:] = 1.0
    picked, state = oort.select(state, context(reg, history, 2, 4), np.random.default_rng(0))
    assert len(set(picked.tolist())) == 4 and sorted(state.exploiting) == sorted(picked.tolist())


def test_epsilon_decays_per_round_to_its_floor():
    one = registry([10], [1.0])
    fedscale, oort_code = Oort(), Oort(exploration_decay=0.95, exploration_min=0.2)
    state = fedscale.init(one, 10, 1)
    assert fedscale.epsilon(state) == pytest.approx(0.882)
    assert oort_code.epsilon(oort_code.init(one, 10, 1)) == pytest.approx(0.855)
    for r in range(1, 54):
        state = fedscale.observe(state, r, 0.0, [], History.empty(1))
    assert fedscale.epsilon(state) == pytest.approx(0.9 * 0.98 ** 54)   # 0.3011
    state = fedscale.observe(state, 54, 0.0, [], History.empty(1))
    state = fedscale.observe(state, 54, 0.0, [], History.empty(1))   # the same aggregation again: no decay
    assert fedscale.epsilon(state) == 0.3                  # 0.9 x 0.98^55 = 0.2951 < the floor
    # k = 10 at the first round: int(10 x 0.882) = 8 explore, 2 exploit where 2 have been tried
    reg = registry([10] * 20, [1.0] * 20)
    oort = Oort()
    history = History.empty(20)
    history.selected[:2] = history.last_selected[:2] = 1
    picked, state = oort.select(oort.init(reg, 10, 10), context(reg, history, 1, 10), np.random.default_rng(0))
    assert len(picked) == 10 and sorted(state.exploiting) == [0, 1]


def report(oort: Oort, state: OortState, history: History, round: int, utilities: list[float]) -> OortState:
    """The exploited devices 0, 1, ... report these utilities (|B| = 1: the RMS loss is the utility)."""
    state = replace(state, exploiting=list(range(len(utilities))))
    return oort.observe(state, round, 0.0, [Outcome(d, round, "arrived", 0.0, 1.0,
                                                    {"train_loss": u, "train_loss_sq": u})
                                            for d, u in enumerate(utilities)], history)


def test_the_pacer_relaxes_t_when_utility_stalls_and_tightens_it_when_it_jumps():
    """Windows of 2 rounds; durations 1..20 s, so T = sorted[int(20 x threshold / 100)]."""
    reg = registry([1] * 20, np.arange(1, 21))
    oort, history = Oort(pacer_step=2), History.empty(20)
    state = oort.init(reg, 10, 2)
    durations = oort.durations(state, reg, history)
    assert oort.preferred(state, durations) == 7.0   # sorted[6]
    for r, utilities in enumerate([[10, 10], [10], [10, 11], [10.5]], start=1):   # round means 10, 10, 10.5, 10.5
        state = report(oort, state, history, r, utilities)
    state = oort.pace(state)
    state = oort.pace(state)                     # judged once a window
    assert state.threshold == 35 and oort.preferred(state, durations) == 8.0   # |21 - 20| <= 0.1 x 20: relaxed
    state = report(oort, state, history, 5, [100])
    state = report(oort, state, history, 5, [])  # the same aggregation again (async's last): no new round
    state = oort.pace(state)
    assert state.threshold == 35                 # 5 rounds: not a window's end
    state = oort.pace(report(oort, state, history, 6, [100]))
    assert state.threshold == 30                 # |200 - 21| >= 5 x 21: tightened
    state = report(oort, state, history, 7, [1])
    state = oort.pace(report(oort, state, history, 8, [10]))   # |11 - 200| is neither within 10% nor 5-fold
    assert state.threshold == 30 and state.window_sum == [100.0, 100.0, 1.0, 10.0]
    # a report of a device not picked by exploitation does not feed the pacer
    state = oort.observe(state, 9, 0.0, [Outcome(5, 9, "arrived", 0.0, 1.0, {"train_loss": 7.0})], history)
    assert state.window_sum[-1] == 0.0 and state.window_count[-1] == 0


def test_the_blacklist_keeps_the_most_picked_out_at_most_three_tenths():
    history = History.empty(10)
    history.selected[:] = history.last_selected[:] = [5, 7, 3, 7, 0, 1, 6, 2, 0, 0]
    history.loss_sq[:] = 1.0
    assert not Oort().blacklist(history).any()                 # off by default
    black = Oort(blacklist_rounds=4).blacklist(history)
    assert np.flatnonzero(black).tolist() == [1, 3, 6]          # 4 over 4 picks, int(0.3 x 10) = 3 kept out
    seven = History.empty(7)
    seven.selected[:] = [9, 9, 9, 9, 0, 0, 0]
    assert np.flatnonzero(Oort(blacklist_rounds=1).blacklist(seven)).tolist() == [0, 1]   # int(2.1): no float slice
    reg = registry([10] * 10, [1.0] * 10)
    oort = Oort(blacklist_rounds=4)
    picked, _ = oort.select(oort.init(reg, 10, 7), context(reg, history, 8, 10), np.random.default_rng(0))
    assert sorted(picked.tolist()) == [0, 2, 4, 5, 7, 8, 9]   # everyone else


def test_options_are_refused_in_one_line():
    with pytest.raises(ValueError, match="clip_bound = 1.5 is outside"):
        Oort(clip_bound=1.5)
    with pytest.raises(ValueError, match="pacer_step = 0 is below 1"):
        Oort(pacer_step=0)
    sc.validate(deadline_scenario(1) | {"selection": {"name": "oort", "options": {"round_threshold": 10}}}, "t", ROOT)


def test_draw_by_weight_falls_back_to_uniform_where_too_few_weigh():
    assert draw(np.array([4, 5, 6]), np.array([0.0, 2.0, 0.0]), 1, np.random.default_rng(0)).tolist() == [5]
    assert sorted(draw(np.array([4, 5, 6]), np.zeros(3), 3, np.random.default_rng(0)).tolist()) == [4, 5, 6]


# ---- end to end -------------------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models train in one torch thread: two would contend for the shared cores, many times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def deadline_scenario(rounds: int) -> dict:
    """scenarios/fedprox_deadline.yaml (100 boards and phones, 30 s deadline) on the 8x8 digits with logreg: the
    fleet and deadline as bundled, the training cheap."""
    raw = yaml.safe_load((ROOT / "scenarios" / "fedprox_deadline.yaml").read_text())
    raw["data"] |= {"name": "digits", "partition": {"kind": "dirichlet", "alpha": 100}}
    return raw | {"model": {"name": "logreg"}, "stop": {"max_rounds": rounds}}


def test_oort_picks_faster_devices_than_uniform(monkeypatch):
    registries = []
    init = Oort.init
    monkeypatch.setattr(Oort, "init", lambda self, reg, *a: (registries.append(reg), init(self, reg, *a))[1])
    mean_task_s = {}
    for name in ("oort", "uniform"):  # oort first: its init records the registry
        _, events = simulate(deadline_scenario(4) | {"selection": {"name": name}}, ROOT / "scenarios")
        events = pd.DataFrame(events)
        picked = events[events.phase == "download"].groupby("round").device.unique()
        assert len(picked) == 4 and all(len(p) == 10 for p in picked)
        mean_task_s[name] = float(np.mean([registries[0].task_s[p].mean() for p in picked]))
    # measured: uniform 0.0357 s, oort 0.0213 s (0.60): exploration ranks by data size x speed, T penalises the slow
    assert mean_task_s["oort"] < 0.75 * mean_task_s["uniform"]


def test_async_dispatch_prefers_faster_devices_too(monkeypatch):
    """scenarios/fedbuff.yaml (20 in flight, buffers of 10) for 3 aggregations: the round is the dispatch number."""
    raw = yaml.safe_load((ROOT / "scenarios" / "fedbuff.yaml").read_text())
    raw["data"] |= {"name": "digits", "partition": {"kind": "dirichlet", "alpha": 100}}
    raw |= {"model": {"name": "logreg"}, "stop": {"max_rounds": 3}}
    registries = []
    init = Oort.init
    monkeypatch.setattr(Oort, "init", lambda self, reg, *a: (registries.append(reg), init(self, reg, *a))[1])
    mean_task_s = {}
    for name in ("oort", "uniform"):
        records, events = simulate(raw | {"selection": {"name": name}}, ROOT / "scenarios")
        events = pd.DataFrame(events)
        tasks = events[events.phase == "download"].drop_duplicates("task")
        assert len(records) == 3 and len(tasks) >= 30
        mean_task_s[name] = float(registries[0].task_s[tasks.device.to_numpy()].mean())
    # measured: uniform 0.0362 s, oort 0.0220 s (0.61)
    assert mean_task_s["oort"] < 0.75 * mean_task_s["uniform"]


def six_devices(rounds: int, **more) -> dict:
    """The tests' two devices three times over on tiny_blobs (10 samples each), 2 a round, picked by Oort with a
    pacer judging every round and a blacklist after 2 tasks, so that its state changes every round."""
    raw = copy.deepcopy(TINY)
    raw["fleet"]["groups"] = [g | {"count": 3} for g in raw["fleet"]["groups"]]
    return raw | {"stop": {"max_rounds": rounds},
                  "selection": {"name": "oort", "options": {"pacer_step": 1, "blacklist_rounds": 2}}} | more


TINY = {**copy.deepcopy(TWO_DEVICES), "name": "tiny", "data": {"name": "tiny_blobs", "partition": {"kind": "iid"}},
        "model": {"name": "logreg"}, "client": {"lr": 0.01, "batch_size": 10, "local_steps": 3}}


def test_a_run_resumed_from_a_checkpoint_gives_the_tables_of_the_unbroken_run(tmp_path, monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    raw = six_devices(8, checkpoint={"every_rounds": 3})
    reference, _ = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "unbroken", quiet=True)
    run_killed_after(raw, tmp_path / "broken", 5)   # checkpoint at 3; rows of 4 and 5 written, then killed
    run, _ = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "broken", quiet=True, resume=True)
    for table in ("rounds.csv", "events.csv"):
        assert (run / table).read_bytes() == (reference / table).read_bytes()


def test_an_older_testbeds_checkpoint_is_read(tmp_path, monkeypatch):
    """A checkpoint that kept Oort's attributes (the older interface's state(): its options and what it had
    learnt) is read into its state, whose fields are named as those attributes were: the resumed run still ends
    with the unbroken run's tables."""
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    raw = six_devices(8, checkpoint={"every_rounds": 3})   # as the test above: a fresh state at 3 ends otherwise
    reference, _ = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "unbroken", quiet=True)
    run_killed_after(raw, tmp_path / "broken", 5)
    options = vars(Oort(**raw["selection"]["options"]))
    older_checkpoint(tmp_path / "broken" / "tiny" / "0" / "checkpoint.pt", lambda state: options | vars(state))
    run, _ = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "broken", quiet=True, resume=True)
    for table in ("rounds.csv", "events.csv"):
        assert (run / table).read_bytes() == (reference / table).read_bytes()


def test_choices_depend_on_what_the_server_saw_not_on_the_hidden_fleet(monkeypatch):
    """Two fleets alike in what devices declare, unlike in what they hide (capability tiers, availability, a
    fluctuating speed): given the same history and candidates, Oort picks alike."""
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    seen = six_devices(1)
    hidden = copy.deepcopy(seen)
    for group in hidden["fleet"]["groups"]:
        group |= {"tiers": [0.25, 1.0], "availability": {"kind": "markov", "mean_on_s": 2, "mean_off_s": 5},
                  "speed": {"kind": "markov", "factor": 0.2, "mean_normal_s": 1, "mean_slow_s": 3}}
    kits = [Kit(sc.build(sc.validate(raw, "test", ROOT)), on_round=lambda row, events: None) for raw in (seen, hidden)]
    assert all(np.array_equal(getattr(kits[0].participation.registry, f), getattr(kits[1].participation.registry, f))
               for f in ("flops_per_s", "num_samples", "task_s"))
    assert not np.array_equal(kits[0].fleet.train_flops_per_s(1), kits[1].fleet.train_flops_per_s(1))
    rng = np.random.default_rng(3)
    for r in range(1, 9):
        candidates = np.sort(rng.choice(6, 4, replace=False))
        picks = [kit.participation.select(r, float(r), 2, lambda: candidates, lambda d: d in candidates)
                 for kit in kits]
        assert picks[0].tolist() == picks[1].tolist()
        outcomes = [Outcome(int(d), r, "arrived" if d % 3 else "cut", float(r), r + 1.0 + d / 10,
                            {"train_loss": 1.0 + d, "train_loss_sq": 1.5 + d} if d % 3 else {}) for d in picks[0]]
        for kit in kits:
            kit.participation.history.dispatched(picks[0], r)
            kit.participation.ended(r, r + 2.0, outcomes)
    states = [kit.participation.selector_state for kit in kits]
    assert states[0].exploiting == states[1].exploiting and np.array_equal(states[0].cut_s, states[1].cut_s)
    # devices 0 and 3 were cut (after 1 + d / 10 s), the others arrived
    assert states[0].cut_s == pytest.approx([1.0, 0, 0, 1.3, 0, 0]) and states[0].exploiting == []
