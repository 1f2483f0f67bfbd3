"""FedLPS and HeteroFL end to end on the two-device scenario (tests/helpers.py), on a small stand-in for MNIST
(200 training digits of 1x28x28, so both devices hold 100 and a run takes a fraction of a second).
Device 0 has capability tier 0.5, device 1 tier 1.0. Checked: the ratio each task ran at reaches events.csv,
the upload and compute of device 0 by hand, serial and batched executors agree, FedLPS's local accuracy comes
from its personal models, runs repeat exactly, and P-UCBV's agents learn from each arrival (Alg. 2)."""
import copy

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import TWO_DEVICES

from testbed import scenario as sc
from testbed.algorithms.ratios import utility
from testbed.data import DATASETS, Dataset
from testbed.engine import Engine
from testbed.execution import score
from testbed.runlog import RunWriter

US = 1e-6
LEARNED = ["train_loss", "accuracy", "loss", "local_accuracy", "local_accuracy_p10"]


def tiny_digits() -> Dataset:
    """10 classes, each a bright bar at its own height over noise: learnable, and made in a millisecond."""
    g = torch.Generator().manual_seed(0)

    def make(n):
        y = torch.arange(n) % 10
        x = 0.5 * torch.randn(n, 1, 28, 28, generator=g)
        for c in range(10):
            x[y == c, 0, 2 * c : 2 * c + 6, 4:24] += 2.0
        return x, y

    (x, y), (tx, ty) = make(200), make(100)
    return Dataset("tiny_digits", x, y, tx, ty, num_classes=10)


class Recording:
    """The strategy, with what it planned, received and kept each round written down."""

    def __init__(self, strategy):
        self.inner, self.tasks, self.arrivals, self.agents, self.bandit_ratios = strategy, [], [], [], []
        self.state = None

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def configure(self, state, ctx, rng):
        tasks = self.inner.configure(state, ctx, rng)
        self.tasks.append({t.device: t for t in tasks})
        self.bandit_ratios.append({d: c["agent"].ratio for d, c in state.clients.items() if "agent" in c})
        return tasks

    def aggregate(self, state, round, arrivals, failures):
        self.state, metrics = self.inner.aggregate(state, round, arrivals, failures)
        self.arrivals.append({a.device: a for a in arrivals})
        self.agents.append({d: copy.deepcopy(c["agent"]) for d, c in self.state.clients.items() if "agent" in c})
        return self.state, metrics


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """run(algorithm, executor='serial', test_fraction=0.0, rounds=2) -> (rounds, events, Recording, experiment,
    run folder), each configuration simulated once per module."""
    done = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(DATASETS, "tiny_digits", tiny_digits)

        def simulate(algorithm, executor="serial", test_fraction=0.0, rounds=2, repeat=0):
            key = (algorithm, executor, test_fraction, rounds, repeat)
            if key not in done:
                raw = copy.deepcopy(TWO_DEVICES)
                raw["name"] = "-".join(map(str, key))
                raw["data"] = {"name": "tiny_digits", "partition": {"kind": "iid"},
                               "client_split": {"test_fraction": test_fraction}}
                raw["fleet"]["groups"][0]["tiers"] = [0.5]
                raw["fleet"]["groups"][1]["tiers"] = [1.0]
                raw.update(algorithm={"name": algorithm}, executor={"kind": executor}, stop={"max_rounds": rounds},
                           client={"lr": 0.1, "local_epochs": 1, "batch_size": 50})
                exp = sc.build(sc.validate(raw, "test"))
                exp.strategy = recording = Recording(exp.strategy)
                writer = RunWriter(tmp_path_factory.mktemp("runs"), exp)
                records, events = [], []

                def on_round(record, rows):
                    records.append(record)
                    events.extend(rows)
                    writer.round(record, rows)

                Engine(exp, on_round).run()
                writer.close()
                done[key] = (pd.DataFrame(records), pd.DataFrame(events), recording, exp, writer.path)
            return done[key]

        yield simulate


def _upload_bytes(ratio):
    """FedLPS's upload of cnn_fedlps at `ratio`: per prunable weight a row bitmask and the kept rows in fp32,
    the rest dense (biases 10 + 20 + 50 and the classifier 500 + 10 floats)."""
    k1, k2, k3 = (max(int(ratio * n), 1) for n in (10, 20, 50))
    return (2 + k1 * 25 * 4) + (3 + k2 * 250 * 4) + (7 + k3 * 320 * 4) + 4 * (80 + 510)


def _phase(events, device, round, phase):
    row = events[(events.device == device) & (events["round"] == round) & (events.phase == phase)].iloc[0]
    return row.end_s - row.start_s


def test_fedlps_ratios_reach_events_csv_and_cost_what_they_should(run):
    rounds, events, recording, exp, folder = run("fedlps")
    assert len(rounds) == 2 and (rounds.arrived == 2).all()
    on_disk = pd.read_csv(folder / "events.csv")
    for r, tasks in enumerate(recording.tasks, start=1):
        for d, task in tasks.items():
            ratios = on_disk[(on_disk.device == d) & (on_disk["round"] == r)].ratio
            assert len(ratios) == 3 and (ratios == task.ratio).all()
        # device 0 (tier 0.5): P-UCBV draws in [0.5, 1) and the cap gives exactly 0.5; device 1 is uncapped
        assert tasks[0].ratio == 0.5 and 0.5 <= tasks[1].ratio < 1.0
        assert tasks[1].ratio == recording.bandit_ratios[r - 1][1]
        assert rounds.bytes_up[r - 1] == _upload_bytes(0.5) + _upload_bytes(tasks[1].ratio)
    assert _upload_bytes(0.5) == 44_872
    # device 0: 0.25 s latency + 44,872 B at 43,680 B/s; 3 x 240,500 mask-only multiply-adds x 100 samples,
    # 2 FLOP each, at 5.766e9 x 0.5 FLOP/s
    assert _phase(events, 0, 1, "upload") == pytest.approx(0.25 + 44_872 / 43_680, abs=US)
    assert _phase(events, 0, 1, "compute") == pytest.approx(2 * 3 * 240_500 * 100 / 2.883e9, abs=US)


def test_heterofl_ratios_are_the_tiers_and_tasks_cost_the_shrunk_model(run):
    rounds, events, _, _, folder = run("heterofl")
    on_disk = pd.read_csv(folder / "events.csv")
    assert on_disk.groupby("device").ratio.unique().map(list).to_dict() == {0: [0.5], 1: [1.0]}
    # down and up: the half-width CNN (22,773 B) and the full model (87,360 B)
    assert (rounds.bytes_up == 22_773 + 87_360).all() and (rounds.bytes_down == 22_773 + 87_360).all()
    assert (rounds.flops == 3 * 100 * (156_250 + 480_500)).all()
    assert _phase(events, 0, 2, "download") == pytest.approx(0.25 + 22_773 / 87_360, abs=US)


@pytest.mark.parametrize("algorithm", ["fedlps", "heterofl"])
def test_serial_and_batched_executors_agree(run, algorithm):
    serial_rounds, serial_events, serial, _, _ = run(algorithm)
    batched_rounds, batched_events, batched, _, _ = run(algorithm, executor="batched")
    pd.testing.assert_frame_equal(serial_events, batched_events)  # selection, ratios and every timeline
    pd.testing.assert_frame_equal(serial_rounds.drop(columns=LEARNED), batched_rounds.drop(columns=LEARNED))
    for column in ("train_loss", "accuracy", "loss"):
        np.testing.assert_allclose(serial_rounds[column], batched_rounds[column], rtol=1e-4, atol=2e-3)
    for d, arrival in serial.arrivals[-1].items():  # the uploads themselves, to float tolerance
        for name, update in arrival.update.items():
            torch.testing.assert_close(batched.arrivals[-1][d].update[name], update, rtol=1e-4, atol=1e-5)


def test_fedlps_local_accuracy_scores_each_device_with_its_personal_model(run):
    rounds, _, recording, exp, _ = run("fedlps", test_fraction=0.2)
    personal = recording.personal_models(recording.state)
    assert sorted(personal) == [0, 1]
    clients = exp.clients
    accuracies, global_accuracies = [], []
    for d in (0, 1):
        own = personal[d]
        masked = {n: own[n] for n in recording.costs.units}  # the personal model is w * m: pruned rows are zero
        for name, n_kept in recording.tasks[-1][d].extras["keep"].items():
            kept = recording.state.clients[d]["scores"][name].argsort(descending=True)[:int(n_kept)]
            assert masked[name].flatten(1).abs().sum(1).nonzero().flatten().tolist() == sorted(kept.tolist())
        rows = torch.from_numpy(np.flatnonzero(clients.local_test_owner == d))
        assert len(rows) == 20  # 0.2 of each device's 100 digits
        correct, _ = score(exp.model, own, clients.local_test_x[rows], clients.local_test_y[rows])
        accuracies.append(correct.mean())
        by_global, _ = score(exp.model, recording.state.params, clients.local_test_x[rows], clients.local_test_y[rows])
        global_accuracies.append(by_global.mean())
    assert rounds.local_accuracy.iloc[-1] == pytest.approx(np.mean(accuracies), abs=1e-12)
    assert np.mean(global_accuracies) != pytest.approx(np.mean(accuracies))  # the global model scores otherwise
    assert rounds.local_accuracy_p10.iloc[-1] == pytest.approx(np.percentile(accuracies, 10), abs=1e-12)


def test_fedlps_run_repeats_exactly(run):
    first = run("fedlps", test_fraction=0.2)
    second = run("fedlps", test_fraction=0.2, repeat=1)
    pd.testing.assert_frame_equal(first[0], second[0], check_exact=True)
    pd.testing.assert_frame_equal(first[1], second[1], check_exact=True)


def test_pucbv_agents_split_at_their_ratio_and_learn_the_reward(run):
    """After round 1 each arrived device's agent has one observation; the arm holding the ratio the device trained
    at, min(z_k, s_k), is split there and both halves hold G = (U(a) - U(a_init)) / T_k, T_k = compute s + upload s
    without the latency (eq. 14-15); no elimination, since a - 0 >= Delta. Device 0 (z = 0.5) trained at 0.5, the
    lower end of the arm [0.5, 0.6), which takes the reward whole; device 1 (z = 1) at its own draw."""
    _, events, recording, exp, _ = run("fedlps")
    agents, arrivals = recording.agents[0], recording.arrivals[0]
    assert sorted(agents) == sorted(arrivals) == [0, 1]
    for d, agent in agents.items():
        s = recording.bandit_ratios[0][d]
        trained = min(s, float(exp.fleet.tier_at(1)[d]))
        assert 0.5 <= s < 1.0 and arrivals[d].task.ratio == trained
        assert agent.observations == 1 and agent.eps == 0.5 and agent.ratio is None
        assert agent.last_accuracy == arrivals[d].metrics["train_accuracy"]
        edges = [lo for lo, _ in agent.intervals()] + [agent.intervals()[-1][1]]
        assert sorted(set(edges) | {trained}) == pytest.approx(sorted({0.5, 0.6, 0.7, 0.8, 0.9, 1.0} | {trained}))
        cost = _phase(events, d, 1, "compute") + _phase(events, d, 1, "upload") - float(exp.fleet.latency_s[d])
        # a_k^{-1}: the initial model's accuracy on the device's own training data, measured before round 1
        initial = recording.inner.ratios.measured_initial_accuracy[d]
        reward = (utility(arrivals[d].metrics["train_accuracy"]) - utility(initial)) / cost
        credited = [arm for arm in agent.arms if arm.lo <= trained < arm.hi or arm.hi == trained]
        assert len(credited) == (1 if d == 0 else 2) and len(agent.arms) == (5 if d == 0 else 6)
        assert all(arm.pulls == 1 and arm.mean == pytest.approx(reward, rel=1e-9) for arm in credited)
        assert all(arm.pulls == 0 for arm in agent.arms if arm not in credited)
    assert recording.agents[1][0].observations == 2  # the next round's arrival is observed too
    assert 0.5 <= recording.bandit_ratios[1][0] < 1.0  # and a fresh ratio drawn for round 2


@pytest.mark.slow
def test_device_state_spilled_to_disk_gives_the_same_run(monkeypatch):
    """FedLPS keeps scores, a bandit and a personal model per device: with one device in memory (the other on
    disk) the tables are the same as with all in memory."""
    from helpers import TWO_DEVICES, simulate

    raw = {**TWO_DEVICES, "algorithm": {"name": "fedlps", "mu": 0}, "stop": {"max_rounds": 3},
           "data": {"name": "mnist5k", "partition": {"kind": "iid"}, "client_split": {"test_fraction": 0.2}}}
    in_memory = simulate(raw)
    spilled = simulate({**raw, "device_state": {"max_in_memory": 1}})
    assert spilled == in_memory


def test_the_first_reward_uses_the_initial_models_measured_accuracy_on_the_devices_data(run):
    _, _, recording, exp, _ = run("fedlps")
    from testbed.execution import score

    measured = recording.inner.ratios.measured_initial_accuracy
    params = {n: p.detach() for n, p in exp.model.named_parameters()}  # the initial model: training is functional
    correct, _ = score(exp.model, params, exp.dataset.train_x, exp.dataset.train_y)
    for d, indices in enumerate(exp.clients.train):
        assert measured[d] == correct[indices].mean()
    assert 0 < measured.min() and measured.max() < 0.5  # an untrained 10-class model: near chance, not the code's 0
