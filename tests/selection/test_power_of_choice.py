"""Power-of-choice: the rule by hand on a tiny context (both loss sources), the probe's clock to the microsecond
(testbed/protocols/probe.py), its losses against torch, end-to-end runs, a resume, and the async refusal."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from helpers import run_killed_after, simulate, tiny_blobs, tiny_scenario

import testbed.data
from testbed import scenario as sc
from testbed.errors import TestbedError
from testbed.protocols.kit import Kit
from testbed.runner import run_scenario
from testbed.selection import History, PowerOfChoice, Registry, SelectionContext

US = 1e-6
MODEL_BYTES = 87_360       # cnn_fedlps in fp32 (tests/testbed/test_engine.py)
TASK_FLOPS = 2_883_000_000  # a task: 3 x 480,500 x 2,000 multiply-adds
PROBE_FLOPS = 961_000_000   # a probe: one forward pass, 480,500 x 2,000


def _context(losses=None, probe=None, n_select=2, samples=(10, 20, 30, 40)):
    n = len(samples)
    registry = Registry(*(np.ones(n) for _ in range(4)), np.array(samples), np.ones(n))
    history = History.empty(n)
    if losses is not None:
        history.loss[:] = losses
    candidates = np.arange(n)
    return SelectionContext(3, 0.0, n_select, registry, history, lambda: candidates, lambda d: True, probe=probe)


def test_reported_losses_rank_the_never_seen_first_then_the_highest():
    ctx = _context(losses=[0.5, math.nan, 0.9, 0.2])
    # d = 4 draws every candidate: device 1 never reported (first), then device 2's 0.9
    assert PowerOfChoice(d=4, loss="reported").select(None, ctx, np.random.default_rng(0))[0].tolist() == [1, 2]


def test_probed_losses_pick_the_highest_among_those_that_answered():
    asked = []

    def probe(ids):
        asked.append(sorted(ids.tolist()))
        return np.array([{0: 0.5, 1: math.nan, 2: 0.9, 3: 0.7}[d] for d in ids.tolist()])

    ctx = _context(probe=probe)
    assert PowerOfChoice(d=4).select(None, ctx, np.random.default_rng(0))[0].tolist() == [2, 3]
    assert asked == [[0, 1, 2, 3]]  # every candidate probed, once
    # device 1 gave no answer: it is never picked, even where fewer than n_select answered
    ctx = _context(probe=lambda ids: np.where(ids == 0, 0.1, math.nan), n_select=2)
    assert PowerOfChoice(d=4).select(None, ctx, np.random.default_rng(0))[0].tolist() == [0]


def test_the_candidate_set_is_drawn_in_proportion_to_data_size():
    """Sizes 10, 30, 60 (p = 0.1, 0.3, 0.6), d = 2: device 0 is left out with probability
    p1 p2 / (1 - p1) + p2 p1 / (1 - p2) = 0.18 / 0.7 + 0.18 / 0.4 = 0.70714..."""
    selector, rng = PowerOfChoice(d=2), np.random.default_rng(1)
    left_out = [0 not in selector.candidate_set(np.arange(3), np.array([10, 30, 60]), 1, rng) for _ in range(4000)]
    expected = 0.18 / 0.7 + 0.18 / 0.4
    assert abs(np.mean(left_out) - expected) < 3 * math.sqrt(expected * (1 - expected) / 4000)
    # d defaults to 2 x n_select, is raised to n_select, capped at the candidates
    assert len(PowerOfChoice().candidate_set(np.arange(10), np.ones(10), 3, rng)) == 6
    assert len(PowerOfChoice(d=1).candidate_set(np.arange(10), np.ones(10), 3, rng)) == 3
    assert len(PowerOfChoice(d=50).candidate_set(np.arange(10), np.ones(10), 3, rng)) == 10


def test_options_are_checked(two_devices):
    with pytest.raises(ValueError, match="d must be at least 1"):
        PowerOfChoice(d=0)
    raw = two_devices | {"selection": {"name": "power_of_choice", "options": {"loss": "x"}}}
    with pytest.raises(TestbedError, match="selection.options.loss"):
        sc.validate(raw, "test")


def test_the_probe_is_refused_for_async_dispatch():
    raw = sc.load("scenarios/fedbuff.yaml").model_dump(mode="json", exclude_unset=True)
    raw["selection"] = {"name": "power_of_choice"}
    with pytest.raises(TestbedError, match="use loss: reported"):
        sc.validate(raw, "test")
    raw["selection"]["options"] = {"loss": "reported"}
    assert sc.validate(raw, "test").selection.name == "power_of_choice"


def test_the_probe_is_refused_for_edge_rounds():
    """Hierarchical aggregation's edge rounds run no probe: asked of the selector as built (validation.py)."""
    with pytest.raises(TestbedError) as err:
        sc.load("scenarios/hierfavg.yaml", ["selection.name=power_of_choice"])
    assert str(err.value) == ("scenarios/hierfavg.yaml: selection.options: 'power_of_choice' asks for a probe at a "
                              "round's start, which an edge round does not run; change the option (e.g. loss: "
                              "reported) or use protocol kind sync")
    assert sc.load("scenarios/hierfavg.yaml", ["selection.name=power_of_choice", "selection.options.loss=reported"])


def _phases(events, round_):
    return {(e["device"], e["phase"], e["outcome"]): (e["start_s"], e["end_s"]) for e in events
            if e["round"] == round_}


def _check(phases, expected):
    assert set(phases) == set(expected)
    for key, (start, end) in expected.items():
        assert phases[key] == (pytest.approx(start, abs=US), pytest.approx(end, abs=US)), key


# The two devices of tests/testbed/test_engine.py. A probe: download as a task's; compute one forward pass over
# 2,000 samples, 2 x 961,000,000 / FLOP/s = 1/3 s on device 0 and 2/3 s on device 1; upload 4 bytes.
PROBE_0 = {"download": (0, 1.25), "compute": (1.25, 1.25 + 1 / 3), "upload": (1.25 + 1 / 3, 1.25 + 1 / 3 + 0.25 + 4 / 43_680)}
PROBE_1 = {"download": (0, 1), "compute": (1, 1 + 2 / 3), "upload": (1 + 2 / 3, 1 + 2 / 3 + 0.5 + 4 / 174_720)}


def test_the_probe_on_the_clock_by_hand(two_devices):
    two_devices |= {"selection": {"name": "power_of_choice"}, "stop": {"max_rounds": 1}}
    records, events = simulate(two_devices)
    t = PROBE_1["upload"][1]  # the last answer: the tasks go out then
    _check(_phases(events, 1), {
        **{(0, phase, "probe"): span for phase, span in PROBE_0.items()},
        **{(1, phase, "probe"): span for phase, span in PROBE_1.items()},
        (0, "download", "done"): (t, t + 1.25), (0, "compute", "done"): (t + 1.25, t + 2.25),
        (0, "upload", "done"): (t + 2.25, t + 4.5),
        (1, "download", "done"): (t, t + 1), (1, "compute", "done"): (t + 1, t + 3), (1, "upload", "done"): (t + 3, t + 4),
    })
    first = records[0]
    assert first["t_start_s"] == 0 and first["t_end_s"] == pytest.approx(t + 4.5, abs=US)
    assert first["bytes_down"] == 4 * MODEL_BYTES  # two probes, two tasks
    assert first["bytes_up"] == 2 * MODEL_BYTES + 2 * 4
    assert first["flops"] == 2 * TASK_FLOPS + 2 * PROBE_FLOPS and first["wasted_flops"] == 0


def test_a_device_offline_mid_probe_gives_no_loss_and_is_not_picked(two_devices, tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("device,start_s,end_s\na,0,1.5\na,20,1e9\n")  # device 0: offline over [1.5, 20)
    two_devices["fleet"]["groups"][0]["availability"] = {"kind": "trace", "file": str(trace)}
    two_devices |= {"selection": {"name": "power_of_choice"}, "stop": {"max_rounds": 1}}
    records, events = simulate(two_devices)
    t = PROBE_1["upload"][1]
    _check(_phases(events, 1), {
        (0, "download", "probe"): (0, 1.25), (0, "compute", "probe"): (1.25, 1.5),
        **{(1, phase, "probe"): span for phase, span in PROBE_1.items()},
        (1, "download", "done"): (t, t + 1), (1, "compute", "done"): (t + 1, t + 3), (1, "upload", "done"): (t + 3, t + 4),
    })
    first = records[0]
    assert (first["selected"], first["arrived"], first["t_end_s"]) == (1, 1, pytest.approx(t + 4, abs=US))
    assert first["bytes_down"] == 3 * MODEL_BYTES and first["bytes_up"] == MODEL_BYTES + 4
    # device 0 downloaded the model and ran 0.25 of its 1/3 s forward pass before vanishing: wasted
    assert first["wasted_bytes"] == MODEL_BYTES
    assert first["wasted_flops"] == pytest.approx(PROBE_FLOPS * 0.75, abs=1)
    assert first["flops"] == TASK_FLOPS + PROBE_FLOPS + first["wasted_flops"]


def test_probed_losses_are_the_models_cross_entropy_on_each_devices_training_data(two_devices):
    exp = sc.build(sc.validate(two_devices, "test"))
    kit = Kit(exp, lambda *_: None)
    state = kit.server.begin().state
    probe = kit.prober.probe(state, 1, 0.0)
    losses = probe(np.array([1, 0]))
    with torch.no_grad():
        for d, loss in zip([1, 0], losses):
            rows = torch.from_numpy(exp.clients.train[d])
            logits = torch.func.functional_call(exp.model, state.params, (exp.dataset.train_x[rows],))
            assert loss == pytest.approx(F.cross_entropy(logits, exp.dataset.train_y[rows]).item(), rel=1e-5)
    with pytest.raises(TestbedError, match="probe was called twice"):
        probe(np.array([0]))


def _tiny(selection: dict, rounds: int = 3) -> dict:
    raw = tiny_scenario({"name": "fedavg"}, rounds=rounds)
    raw["fleet"] = {"groups": [{"profile": "raspberry_pi_4", "count": 12}]}
    raw["round"] = {"clients_per_round": 3}
    return raw | {"selection": selection}


def test_end_to_end_the_probe_picks_the_highest_losses(monkeypatch):
    """Round 1 starts from the initial model: the three picked are the three highest losses over every device
    (d caps at the 12 candidates), computed here with torch."""
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    raw = _tiny({"name": "power_of_choice", "options": {"d": 100}})
    exp = sc.build(sc.validate(raw, "test"))
    with torch.no_grad():
        losses = [F.cross_entropy(exp.model(exp.dataset.train_x[torch.from_numpy(rows)]),
                                  exp.dataset.train_y[torch.from_numpy(rows)]).item() for rows in exp.clients.train]
    records, events = simulate(raw)
    events = pd.DataFrame(events)
    first = events[events["round"] == 1]
    assert set(first[first["outcome"] == "probe"]["device"]) == set(range(12))
    picked = set(first[first["outcome"] != "probe"]["device"])
    assert picked == set(np.argsort(losses)[-3:].tolist())
    assert [r["bytes_down"] for r in records] == [(12 + 3) * 21 * 4] * 3  # logreg: 21 parameters in fp32


def test_end_to_end_reported_losses_try_the_unseen_first(monkeypatch):
    """rpow-d with every candidate drawn: no device that reported a loss is picked while 3 unseen remain."""
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    _, events = simulate(_tiny({"name": "power_of_choice", "options": {"d": 100, "loss": "reported"}}))
    events = pd.DataFrame(events)
    assert "probe" not in set(events["outcome"])
    per_round = [set(events[events["round"] == r]["device"]) for r in (1, 2, 3)]
    assert all(len(s) == 3 for s in per_round)
    assert not (per_round[0] & per_round[1]) and not ((per_round[0] | per_round[1]) & per_round[2])


def test_a_resumed_run_gives_the_tables_of_an_unbroken_run(tmp_path, monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    raw = _tiny({"name": "power_of_choice"}, rounds=6) | {"checkpoint": {"every_rounds": 2}}
    raw["fleet"]["groups"][0]["availability"] = {"kind": "markov", "mean_on_s": 3, "mean_off_s": 1}
    reference, _ = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "unbroken", quiet=True)
    run_killed_after(raw, tmp_path / "broken", 3)
    run, _ = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "broken", quiet=True, resume=True)
    for table in ("rounds.csv", "events.csv"):
        assert (run / table).read_bytes() == (reference / table).read_bytes()
    assert "probe" in (run / "events.csv").read_text()


def test_the_probes_phases_cost_energy_like_any_phase(monkeypatch):
    """With energy accounted, each probe phase has its joules in events.csv, and the round's energy_J is the sum
    of every phase's, probes included."""
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    raw = _tiny({"name": "power_of_choice"}, rounds=1) | {"resources": {"energy": True}}
    records, events = simulate(raw)
    events = pd.DataFrame(events)
    probes = events[events["outcome"] == "probe"]
    assert len(probes) == 3 * 6 and (probes["energy_J"] > 0).all()  # d = 2 x 3 candidates, 3 phases each
    assert records[0]["energy_J"] == pytest.approx(events["energy_J"].sum(), rel=1e-12)
