"""FedDUMAP (testbed/algorithms/feddumap.py, specs/feddumap.md): the server's data, FedDU's tau_eff, FedDUM's
momentum, FedAP's rates, filters and shrunk model, and the server's work on the clock, by hand.

Hand round for tau_eff: three devices hold label counts [1,1,1], [3,0,0], [0,0,3], so P = [4,1,4]/9; devices 0
and 1 arrive (n' = 6, P' = [4,1,1]/6); the server holds [2,2,0] (n0 = 4). A model of zeros scores every sample
as class 0, so acc = 2/4. With log base 2, D(P') = 0.0674271 and D(P0) = 0.3199454, so at t = 3
    importance = 4 D(P') / (4 D(P') + 6 D(P0)) = 0.1231893,   a = (1 - 0.5) 0.1231893 * 1 * 0.99^3 = 0.0597652.
"""
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import run_recorded, tiny_blobs, tiny_scenario
from torch import nn

from testbed import scenario as sc
from testbed.algorithms import fedap
from testbed.algorithms.base import Arrival
from testbed.algorithms.feddumap import FedDUMAP
from testbed.algorithms.hessian import gap_rate, hessian_vector_product, lanczos_density
from testbed.algorithms.server_side import server_sgd
from testbed.data import DATASETS
from testbed.data.server import SharedData, carve
from testbed.errors import TestbedError
from testbed.flops import compute_seconds, flop_counts, training_flops
from testbed.local import LocalSGD, train_one
from testbed.models.cnn import FedDUMAPCNN
from testbed.payload import UnitMasked
from testbed.submodel import SubmodelCosts

TOL = dict(rel=1e-6, abs=1e-9)


def shared(histogram, device_histograms, x=None, y=None) -> SharedData:
    if y is None:
        y = torch.from_numpy(np.repeat(np.arange(len(histogram)), histogram))
        x = torch.zeros(len(y), 2)
    return SharedData(x, y, np.asarray(histogram), np.asarray(device_histograms), seed=0)


@pytest.mark.parametrize("classes, degree", [(2, 0.6100), (5, 0.3113)])
def test_non_iid_degree_of_server_data_covering_some_of_10_classes(classes, degree):
    server = [10] * classes + [0] * (10 - classes)
    assert shared(server, np.full((4, 10), 25)).non_iid_degree == pytest.approx(degree, abs=5e-5)


def test_carve_takes_equal_counts_of_the_chosen_classes_apart_from_the_devices():
    labels = np.repeat(np.arange(10), 100)
    server, pool = carve(labels, 10, 0.1, 5, np.random.default_rng(0))
    assert len(server) == round(0.1 * 1000 / 1.1) == 91                  # n0 / (n - n0) = 0.1
    counts = np.bincount(labels[server], minlength=10)
    assert sorted(counts[counts > 0].tolist()) == [18, 18, 18, 18, 19] and (counts > 0).sum() == 5
    assert len(np.intersect1d(server, pool)) == 0 and len(server) + len(pool) == 1000
    with pytest.raises(ValueError, match="classes: 11"):
        carve(labels, 10, 0.1, 11, np.random.default_rng(0))


def linear_strategy(**terms) -> FedDUMAP:
    model = nn.Linear(2, 3)
    data = shared([2, 2, 0], [[1, 1, 1], [3, 0, 0], [0, 0, 3]])
    return FedDUMAP(LocalSGD(lr=0.1, batch_size=2), SubmodelCosts(model, torch.zeros(1, 2)), data, **terms)


def arrival(device, n, update) -> Arrival:
    return Arrival(device, n, update, {"train_loss": 1.0})


def test_tau_eff_by_hand():
    strategy = linear_strategy()
    zeros = {"weight": torch.zeros(3, 2), "bias": torch.zeros(3)}
    arrivals = [arrival(0, 3, zeros), arrival(1, 3, zeros)]
    assert strategy._alpha(zeros, 3, arrivals) == pytest.approx(0.0597652, abs=1e-7)
    fixed = linear_strategy(server_update="fixed", fixed_steps=1)
    assert fixed._alpha(zeros, 3, arrivals) == pytest.approx(1 / 2)   # tau = ceil(4 / 2) x 1 epoch


def test_server_momentum_steps_with_the_rounds_displacement():
    """No server update: w^ = w + D. m_1 = g_1 = -D_1, w_1 = w_0 + D_1; m_2 = 0.9 m_1 + 0.1 (-D_2)."""
    strategy = linear_strategy(server_update="none", server_momentum=0.9)
    state = strategy.init({"weight": torch.zeros(3, 2), "bias": torch.ones(3)})
    d1 = {"weight": torch.full((3, 2), 0.5), "bias": torch.full((3,), -1.0)}
    d2 = {"weight": torch.full((3, 2), 2.0), "bias": torch.zeros(3)}
    state, metrics = strategy.aggregate(state, 1, [arrival(0, 3, d1)], [])
    assert state.params["bias"].tolist() == pytest.approx([0.0] * 3) and metrics["server_flops"] == 0
    state, _ = strategy.aggregate(state, 2, [arrival(0, 3, d2)], [])
    assert state.params["weight"].flatten().tolist() == pytest.approx([0.5 + 0.9 * 0.5 + 0.1 * 2.0] * 6)
    assert state.params["bias"].tolist() == pytest.approx([0.0 - 0.9 * 1.0] * 3)
    assert state.optimizer["m"]["weight"][0, 0].item() == pytest.approx(-0.9 * 0.5 - 0.1 * 2.0)


def test_device_momentum_is_the_ema_form(blobs):
    """m = 0.9 m + 0.1 g, w -= 0.5 m on g = w - 1 from w = 3: m = 0.2, w = 2.9; g = 1.9, m = 0.37, w = 2.715."""
    client = sc.build(sc.validate(tiny_server({"name": "feddum"}))).strategy.client
    assert (client.lr, client.momentum) == (pytest.approx(0.01 * (1 - 0.9)), 0.9)   # client.lr 0.01, beta' 0.9
    client = replace(client, lr=0.5 * (1 - 0.9), batch_size=1, local_steps=None)
    loss = lambda p, anchor, x, y, extras: (0.5 * (p["w"] - 1).square().sum(), {"accuracy": torch.zeros(())})  # noqa
    trained, _, _ = train_one(loss, {"w": torch.tensor([3.0])}, torch.zeros(2, 1), torch.zeros(2), client,
                              np.random.default_rng(0))
    assert trained["w"].item() == pytest.approx(2.715, rel=1e-6)


def trained_on_server(strategy, params, round):
    """The server's own SGD on D0 as the strategy runs it, from its (seed, round) stream."""
    return server_sgd(strategy.costs.model, params, strategy.shared.x, strategy.shared.y, strategy.client,
                      strategy.shared.rng(0, round))[0]


@pytest.mark.parametrize("update", ["dynamic", "client"])
def test_feddu_interpolates_and_hybrid_fl_averages_in_the_server(update):
    """FedDU: w_t = (1 - a) w_half + a w_srv (a = 0.0597652 at round 3, as above). Hybrid-FL: the server's change
    from w_{t-1} joins the devices' with weight n0 = 4 against n' = 6. Server FLOPs: 2 steps of batch 2 (tau =
    ceil(4 / 2)) on a 6-multiply-add linear model, 3 x 6 x 4, plus FedDU's scoring of D0, 6 x 4."""
    strategy = linear_strategy(server_update=update)
    w = {"weight": torch.tensor([[0.2, -0.1], [0.0, 0.3], [-0.2, 0.1]]), "bias": torch.zeros(3)}
    step = {"weight": torch.full((3, 2), 0.1), "bias": torch.tensor([0.1, -0.1, 0.0])}
    state, metrics = strategy.aggregate(strategy.init(w), 3, [arrival(0, 3, step), arrival(1, 3, step)], [])
    half = {n: w[n] + step[n] for n in w}
    if update == "dynamic":
        alpha = strategy._alpha(half, 3, [arrival(0, 3, step), arrival(1, 3, step)])
        served = trained_on_server(strategy, half, 3)
        expected = {n: (1 - alpha) * half[n] + alpha * served[n] for n in w}
        assert metrics["server_flops"] == 3 * 6 * 4 + 6 * 4
    else:
        served = trained_on_server(strategy, w, 3)
        expected = {n: w[n] + (6 * step[n] + 4 * (served[n] - w[n])) / 10 for n in w}
        assert metrics["server_flops"] == 3 * 6 * 4
    for n in w:
        assert torch.allclose(state.params[n], expected[n], atol=1e-6)


def test_rates_threshold_and_weights_by_hand():
    params = {"conv.weight": torch.tensor([[0.1, -0.2], [0.3, 0.9]]), "fc.weight": torch.tensor([0.05, -1.0, 0.4])}
    # all 7 magnitudes: 0.05 0.1 0.2 0.3 0.4 0.9 1.0; floor(7 x 0.45) = 3rd smallest is 0.2
    threshold = fedap.magnitude_threshold(params, 0.45)
    assert threshold == pytest.approx(0.2)
    assert fedap.layer_rates(params, ["conv.weight"], threshold) == {"conv.weight": pytest.approx(1 / 4)}
    assert fedap.layer_rates(params, ["conv.weight"], 0.35) == {"conv.weight": pytest.approx(3 / 4)}
    assert fedap.magnitude_threshold(params, 0.1) == -float("inf")     # floor(0.7) = 0: nothing pruned
    # Eq. 15: weights n / D = 100 / 0.25 = 400 and 50 / 0.5 = 100, so p = (400 0.2 + 100 0.6) / 500
    assert fedap.aggregate_rate(np.array([0.2, 0.6]), np.array([100, 50]), np.array([0.25, 0.5])) == \
        pytest.approx(0.28)
    masks = fedap.keep_highest({"c": torch.tensor([1.0, 3.0, 3.0, 2.0])}, {"c": 0.6})   # keep 4 - floor(2.4) = 2
    assert masks["c"].tolist() == [False, True, True, False]


def test_lanczos_recovers_the_spectrum_of_a_quadratic():
    curvature = torch.tensor([-1.0, 0.5, 2.0, 3.0])
    params = {"p": torch.tensor([0.3, -0.2, 1.0, 0.0])}
    hvp = hessian_vector_product(lambda p: 0.5 * (curvature * p["p"].square()).sum(), params)
    assert hvp({"p": torch.ones(4)})["p"].tolist() == pytest.approx(curvature.tolist())
    values, weights = lanczos_density(hvp, params, 4, np.random.default_rng(0))
    assert values.tolist() == pytest.approx(sorted(curvature.tolist()), abs=1e-6)
    assert weights.tolist() == pytest.approx([0.25] * 4, abs=1e-6)   # a Rademacher vector's squared cosines


def test_gap_rate_scans_to_the_plateau():
    """ratio(0) = 1. With inc 0.1, 0.05, 0.025 and 0.0125 the mass above t falls below 0.5 (at t = 0.1, 0.05, 0.05,
    0.05) before it settles; with inc 0.00625 it reads 1, 0.6, 0.6, 0.6, 0.6: three calm steps, rate 0.6."""
    values, weights = np.array([0.01, 0.05, 2.0, 5.0]), np.array([0.4, 0.3, 0.2, 0.1])
    assert gap_rate(values, weights) == pytest.approx(0.6)


class ShrunkCNN(nn.Module):
    """FedDUMAPCNN at 1x28x28 with its own channel counts: the pruned model built at its new shape."""

    def __init__(self, c1, c2, c3):
        super().__init__()
        self.conv1, self.conv2, self.conv3 = nn.Conv2d(1, c1, 3), nn.Conv2d(c1, c2, 3), nn.Conv2d(c2, c3, 3)
        self.fc1, self.fc2 = nn.Linear(c3 * 9, 64), nn.Linear(64, 10)

    forward = FedDUMAPCNN.forward


def test_pruned_model_is_the_shrunk_network_in_flops_bytes_and_outputs():
    torch.manual_seed(0)
    model = FedDUMAPCNN((1, 28, 28), 10)
    x = torch.rand(20, 1, 28, 28)
    data = SharedData(x, torch.zeros(20, dtype=torch.long), np.array([20] + [0] * 9), np.ones((2, 10)), 0)
    costs = SubmodelCosts(model, x[:1])
    strategy = FedDUMAP(LocalSGD(lr=0.1), costs, data, prune="uniform", prune_rate=0.5)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    pruned, optimizer, flops, tables = strategy._prune(params, {}, [])
    units = optimizer["units"]
    kept = [int(units[f"conv{i}.weight"].sum()) for i in (1, 2, 3)]
    assert kept == [16, 32, 32]                               # d - floor(0.5 d)
    assert [row["kept"] for row in tables["pruning.csv"]] == kept
    assert flops == flop_counts(model, x[:1])[0] * 20           # HRank: one forward pass of the server's 20 samples
    small = ShrunkCNN(*kept)
    assert costs.forward_flops(units, structured=True) == flop_counts(small, x[:1])[0]
    shapes = {n: p.shape for n, p in params.items()}
    codec = UnitMasked.structured(costs.structure(units))
    # kept entries in fp32, plus the bitmasks: rows of conv1 (w, b) 4 + 4, conv2 8 + 8 and 4 columns, conv3 8 + 8
    # and 8 columns, fc1's 576 columns 72 bytes
    assert codec.nbytes(shapes) == 4 * sum(p.numel() for p in small.parameters()) + 124
    rows = {f"conv{i}": units[f"conv{i}.weight"] for i in (1, 2, 3)}
    columns = {"conv1": torch.ones(1, dtype=torch.bool), "conv2": rows["conv1"], "conv3": rows["conv2"]}
    with torch.no_grad():
        for name in ("conv1", "conv2", "conv3"):
            getattr(small, name).weight.copy_(pruned[f"{name}.weight"][rows[name]][:, columns[name]])
            getattr(small, name).bias.copy_(pruned[f"{name}.bias"][rows[name]])
        small.fc1.weight.copy_(pruned["fc1.weight"][:, rows["conv3"].repeat_interleave(9)])
        small.fc1.bias.copy_(pruned["fc1.bias"])
        small.fc2.load_state_dict({"weight": pruned["fc2.weight"], "bias": pruned["fc2.bias"]})
        full = torch.func.functional_call(model, pruned, (x,))
        assert torch.allclose(full, small(x), atol=1e-5)


def tiny_server(algorithm: dict, **more) -> dict:
    raw = tiny_scenario(algorithm, **more)
    raw["data"] = {"name": "tiny_blobs", "partition": {"kind": "iid"}, "server": {"fraction": 0.1, "classes": 2}}
    return raw


@pytest.fixture
def blobs(monkeypatch):
    monkeypatch.setitem(DATASETS, "tiny_blobs", tiny_blobs)


class Recording:
    def __init__(self, strategy):
        self.strategy, self.flops = strategy, []

    def __getattr__(self, name):
        return getattr(self.strategy, name)

    def aggregate(self, state, round, arrivals, failures):
        state, metrics = self.strategy.aggregate(state, round, arrivals, failures)
        self.flops.append(metrics.get("server_flops", 0))
        return state, metrics


def test_server_work_is_charged_on_the_clock(blobs):
    """n0 = round(0.1 x 60 / 1.1) = 5; 3 steps of batch 5 on logreg (18 multiply-adds a sample): 3 x 18 x 15
    training FLOPs plus 18 x 5 to score D0, 900 in all; on the A100 (19.5 TFLOP/s x 0.4) that is
    2 x 900 / 7.8e12 s after the devices' round."""
    rounds, _, events = run_recorded(tiny_server({"name": "feddu"}), Recording)
    server = events[events["phase"] == "server"]
    assert (server["device"] == -1).all() and len(server) == 2
    assert rounds["server_flops"].tolist() == [training_flops(18, 15) + 18 * 5] * 2 == [900, 900]
    assert (server["end_s"] - server["start_s"]).tolist() == pytest.approx([compute_seconds(900, 7.8e12)] * 2)
    assert rounds["t_end_s"].tolist() == pytest.approx(server["end_s"].tolist())
    devices = events[events["phase"] == "upload"].groupby("round")["end_s"].max()
    assert server["start_s"].tolist() == pytest.approx(devices.tolist())


def test_server_data_is_required_and_shared_with_devices_in_data_sharing(blobs):
    with pytest.raises(TestbedError, match="data.server: feddumap trains on the server's own data"):
        sc.validate(tiny_scenario({"name": "feddumap"}))
    plain = sc.build(sc.validate(tiny_server({"name": "fedavg"})))
    sharing = sc.build(sc.validate(tiny_server({"name": "data_sharing"})))
    assert plain.shared.size == 5 and plain.clients.num_samples.sum() == 55
    extra = round(0.05 * 55)                          # share_fraction x all device data, at most n0
    assert (sharing.clients.num_samples - plain.clients.num_samples).tolist() == [extra, extra]


def test_imc_masks_and_executors_agree(blobs):
    """IMC on logreg: one unstructured prune at round 1; pruned entries stay zero; serial = batched."""
    tables = []
    for executor in ("serial", "batched"):
        raw = tiny_server({"name": "imc", "prune_round": 1, "lanczos_steps": 10}, executor=executor, rounds=3)
        rounds, _, _ = run_recorded(raw, Recording)
        tables.append(rounds)
    pd.testing.assert_frame_equal(tables[0], tables[1])
    assert tables[0]["server_flops"].tolist()[1:] == [0, 0] and tables[0]["server_flops"][0] > 0


def test_a_resumed_run_after_pruning_has_the_tables_of_an_unbroken_run(blobs, tmp_path, monkeypatch):
    """FedDU with both momenta and an unstructured prune at round 2, checkpointed at 3, killed after 4: the
    momentum and the masks come back from the checkpoint (and the server's streams from the seed)."""
    from testbed.runlog import RunWriter
    from testbed.runner import run_scenario

    algorithm = {"name": "feddumap", "prune": "unstructured", "prune_round": 2, "lanczos_steps": 5}
    scenario = sc.validate(tiny_server(algorithm, rounds=6) | {"checkpoint": {"every_rounds": 3}}, "test")
    reference, summary = run_scenario(scenario, "test", tmp_path / "unbroken", quiet=True)
    write_round = RunWriter.round

    def round_then_die(self, record, events):
        write_round(self, record, events)
        if record["round"] == 4:
            raise SystemExit("killed")

    with monkeypatch.context() as patch:
        patch.setattr(RunWriter, "round", round_then_die)
        with pytest.raises(SystemExit):
            run_scenario(scenario, "test", tmp_path / "broken", quiet=True)
    run, resumed = run_scenario(scenario, "test", tmp_path / "broken", quiet=True, resume=True)
    assert resumed == summary
    for table in ("rounds.csv", "events.csv", "pruning.csv", "pruning_participants.csv"):
        assert (run / table).read_bytes() == (reference / table).read_bytes()


def test_structured_pruning_of_a_recurrent_model_is_refused_in_one_line():
    from types import SimpleNamespace

    from testbed.schema.algorithms.server_data import FedAPConfig
    from testbed.strategies import strategy_of

    build = SimpleNamespace(costs=SimpleNamespace(model=nn.Sequential(nn.LSTM(2, 2))))
    with pytest.raises(TestbedError, match="algorithm.prune: fedap removes conv filters"):
        strategy_of(FedAPConfig(name="fedap"), build)


def test_prunefl_importance_is_the_summed_squared_gradient_by_hand():
    """Logistic regression z = W x + b on one sample per minibatch: dL/dz = softmax(z) - onehot(y), so
    dL/dW = (softmax(z) - onehot(y)) x^T. With W = 0, b = 0 and 3 classes softmax is 1/3 each: sample x = (1, 2),
    y = 0 gives dL/dW rows (-2/3, -4/3), (1/3, 2/3), (1/3, 2/3); x = (0, 1), y = 2 gives (0, 1/3), (0, 1/3),
    (0, -2/3). Summed squares: W = [[4/9, 17/9], [1/9, 5/9], [1/9, 8/9]], b = [4/9 + 1/9, 1/9 + 1/9, 1/9 + 4/9]."""
    from testbed.algorithms.server_side import squared_gradients

    model = nn.Linear(2, 3)
    params = {"weight": torch.zeros(3, 2), "bias": torch.zeros(3)}
    x, y = torch.tensor([[1.0, 2.0], [0.0, 1.0]]), torch.tensor([0, 2])
    total = squared_gradients(model, params, x, y, batch_size=1, rng=np.random.default_rng(0))
    assert total["weight"].reshape(-1).tolist() == pytest.approx([4 / 9, 17 / 9, 1 / 9, 5 / 9, 1 / 9, 8 / 9])
    assert total["bias"].tolist() == pytest.approx([5 / 9, 2 / 9, 5 / 9])


def test_prunefl_reconfigures_its_mask_to_the_largest_importance(blobs):
    """PruneFL on logreg: IMC's mask at round 1, then every round the same number of entries re-chosen by
    importance on the server data; entries outside the mask are zero; the pass over n0 = 5 server samples costs
    training_flops(18, 5) = 270 server FLOPs; serial = batched."""
    runs = []
    for executor in ("serial", "batched"):
        raw = tiny_server({"name": "prunefl", "prune_round": 1, "reconfigure_every": 1, "prune_rate": 0.5},
                          executor=executor, rounds=3)
        exp = sc.build(sc.validate(raw, "test"))
        states = []
        strategy = exp.strategy

        class Keep:
            def __getattr__(self, name):
                return getattr(strategy, name)

            def aggregate(self, state, round, arrivals, failures):
                state, metrics = strategy.aggregate(state, round, arrivals, failures)
                states.append(state)
                return state, metrics

        exp.strategy = Keep()
        records = []
        from testbed.engine import Engine

        Engine(exp, lambda record, rows: records.append(record)).run()
        runs.append((pd.DataFrame(records), states))
    (rounds, states), (batched, _) = runs
    pd.testing.assert_frame_equal(rounds, batched)
    assert rounds["server_flops"].tolist()[1:] == [training_flops(18, 5)] * 2 == [270, 270]
    counts = [int(sum(h.sum() for h in s.optimizer["held"].values())) for s in states]
    assert counts == [12, 12, 12]  # V = the floor(21 x 0.5) = 10th smallest |v|; the 9 below it are pruned
    for s in states:
        assert all(torch.all(s.params[n][h == 0] == 0) for n, h in s.optimizer["held"].items())
    assert any(not torch.equal(states[0].optimizer["held"][n], states[2].optimizer["held"][n])
               for n in states[0].params)              # the mask moved


def test_prunefl_keeps_the_entries_of_largest_importance(blobs):
    from testbed.algorithms.server_side import squared_gradients

    exp = sc.build(sc.validate(tiny_server({"name": "prunefl", "prune_round": 1}), "test"))
    strategy = exp.strategy
    params = {n: torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) for n, p in
              exp.model.named_parameters()}
    held = {n: (torch.arange(p.numel()) % 3 == 0).float().reshape(p.shape) for n, p in params.items()}
    masks, flops = strategy._reconfigure(params, held, 4)
    importance = squared_gradients(strategy.costs.model, params, strategy.shared.x, strategy.shared.y,
                                   strategy.client.batch_size, strategy.shared.rng(0, 4))
    kept = torch.cat([importance[n][masks[n] == 1] for n in params])
    dropped = torch.cat([importance[n][masks[n] == 0] for n in params])
    assert len(kept) == sum(int(h.sum()) for h in held.values()) and kept.min() >= dropped.max()
    assert flops == training_flops(18, 5)
