"""Serial, batched and Ray executors train the same clients to the same models (within float tolerance), and
leave selection, timelines, bytes and FLOPs untouched."""
import logging

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import write_yaml

from testbed.algorithms import FedAvg
from testbed.cli import main
from testbed.execution import make_loss_fn
from testbed.execution.precision import exact_float32
from testbed.local import LocalSGD, train_one, train_stacked

CLIENT_SIZES = [23, 10, 7, 31]  # unequal, with partial last batches


class TinyBatchNormNet(torch.nn.Module):
    """Conv + BatchNorm without running statistics: batch statistics must not see padding."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.norm = torch.nn.BatchNorm2d(4, track_running_stats=False)
        self.fc = torch.nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.norm(self.conv(x))).flatten(1))


@pytest.mark.parametrize("mu", [0.0, 0.1])
def test_stacked_training_equals_one_client_at_a_time(mu):
    torch.manual_seed(0)
    model = TinyBatchNormNet()
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    xs = [torch.randn(n, 1, 8, 8) for n in CLIENT_SIZES]
    ys = [torch.randint(0, 3, (n,)) for n in CLIENT_SIZES]
    strategy = FedAvg(LocalSGD(lr=0.1, local_epochs=2, batch_size=4, momentum=0.9, weight_decay=1e-3),
                      proximal_mu=mu)
    fedavg = strategy.objective(make_loss_fn(model))

    def objective(params, anchor, x, y, extras):  # freezes what the client's mask says
        loss, aux = fedavg(params, anchor, x, y, extras)
        return loss, aux | {"update_mask": extras["mask"]}

    # per-client masks: client i freezes output unit i of the convolution
    masks = [{"mask": {"conv.weight": (torch.arange(4) != i).float().reshape(4, 1, 1, 1)}} for i in range(len(xs))]
    serial = [train_one(objective, params, x, y, strategy.client, np.random.default_rng(i), masks[i])
              for i, (x, y) in enumerate(zip(xs, ys))]
    stacked = train_stacked(objective, [params] * len(xs), xs, ys, strategy.client,
                            [np.random.default_rng(i) for i in range(len(xs))], masks)
    for i, ((p_serial, loss_serial, s_serial), (p_stacked, loss_stacked, s_stacked)) in enumerate(zip(serial, stacked)):
        assert loss_stacked["train_loss"] == pytest.approx(loss_serial["train_loss"], rel=1e-5)
        assert loss_stacked["train_accuracy"] == pytest.approx(loss_serial["train_accuracy"], rel=1e-6)
        for name in params:
            torch.testing.assert_close(p_stacked[name], p_serial[name], rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(s_stacked[f"m:{name}"], s_serial[f"m:{name}"], rtol=1e-4, atol=1e-5)
        for trained in (p_serial, p_stacked):  # the masked unit kept its weights exactly; the others moved
            assert torch.equal(trained["conv.weight"][i], params["conv.weight"][i])
            assert not torch.equal(trained["conv.weight"][(i + 1) % 4], params["conv.weight"][(i + 1) % 4])


def test_optimizer_state_carries_over_between_rounds():
    """Two rounds with the state handed back equal one run of both rounds' batches with one momentum buffer."""
    w0 = {"w": torch.tensor([1.0, -1.0])}
    cfg = LocalSGD(lr=0.1, local_epochs=1, batch_size=2, momentum=0.9)
    def objective(p, anchor, x, y, extras):  # gradient w
        return 0.5 * p["w"].square().sum(), {"accuracy": torch.tensor(0.0)}

    x, y = torch.zeros(2, 1), torch.zeros(2)
    w1, _, state = train_one(objective, w0, x, y, cfg, np.random.default_rng(0))
    w2, _, _ = train_one(objective, w1, x, y, cfg, np.random.default_rng(1), state=state)
    (w1s, _, state_s), = train_stacked(objective, [w0], [x], [y], cfg, [np.random.default_rng(0)])
    (w2s, _, _), = train_stacked(objective, [w1s], [x], [y], cfg, [np.random.default_rng(1)], states=[state_s])
    # by hand: buf1 = w0, w1 = 0.9 w0; buf2 = 0.9 buf1 + w1 = 1.8 w0, w2 = w1 - 0.1 * 1.8 w0 = 0.72 w0
    torch.testing.assert_close(w2["w"], 0.72 * w0["w"])
    torch.testing.assert_close(w2s["w"], 0.72 * w0["w"])


FLEET = {"groups": [
    {"profile": "jetson_nano", "count": 3},
    {"profile": "phone_mid", "count": 3, "availability": {"kind": "markov", "mean_on_s": 20, "mean_off_s": 10}},
]}


def _run(tmp_path, two_devices, executor, name):
    two_devices.update(name=name, fleet=FLEET, executor=executor, round={"clients_per_round": 3, "overcommit": 1.5},
                       client={"lr": 0.05, "local_epochs": 1, "batch_size": 32, "momentum": 0.5},
                       algorithm={"name": "fedprox", "mu": 0.01}, stop={"max_rounds": 3})
    file = write_yaml(tmp_path / f"{name}.yaml", two_devices)
    assert main(["run", str(file), "--out", str(tmp_path), "--quiet"]) == 0
    run = tmp_path / name / "0"
    return pd.read_csv(run / "rounds.csv"), pd.read_csv(run / "events.csv")


def _same_run(reference, other):
    (rounds_a, events_a), (rounds_b, events_b) = reference, other
    pd.testing.assert_frame_equal(events_a, events_b)  # selection and every timeline, to the last digit
    learned = ["train_loss", "accuracy", "loss"]
    pd.testing.assert_frame_equal(rounds_a.drop(columns=learned), rounds_b.drop(columns=learned))
    for column in learned:
        np.testing.assert_allclose(rounds_a[column], rounds_b[column], rtol=1e-4, atol=2e-3)


@pytest.mark.slow
def test_serial_and_batched_runs_agree(two_devices, tmp_path):
    serial = _run(tmp_path, dict(two_devices), {"kind": "serial"}, "serial")
    _same_run(serial, _run(tmp_path, dict(two_devices), {"kind": "batched"}, "batched"))
    _same_run(serial, _run(tmp_path, dict(two_devices), {"kind": "batched", "max_clients": 2}, "batched2"))


@pytest.mark.slow
def test_ray_with_two_workers_agrees_with_serial(two_devices, tmp_path):
    pytest.importorskip("ray")
    serial = _run(tmp_path, dict(two_devices), {"kind": "serial"}, "serial")
    _same_run(serial, _run(tmp_path, dict(two_devices), {"kind": "ray", "workers": 2}, "ray"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kind", ["serial", "batched"])
def test_training_on_cuda_agrees_with_the_cpu(two_devices, tmp_path, kind):
    """The clock is the CPU's to the last digit; the first round's learning within float32's tolerance. Later
    rounds compound the float differences (measured on an H200, serial: round 1's train loss 1.1e-5 apart and its
    evaluation loss 2.4e-4, round 2's train loss 1.3 % apart, in this run of a few small batches), so they are held
    to the accuracy alone, within two points."""
    rounds_cpu, events_cpu = _run(tmp_path, dict(two_devices), {"kind": "serial"}, "cpu")
    rounds, events = _run(tmp_path, dict(two_devices), {"kind": kind, "device": "cuda"}, f"{kind}-cuda")
    pd.testing.assert_frame_equal(events_cpu, events)
    learned = ["train_loss", "accuracy", "loss"]
    pd.testing.assert_frame_equal(rounds_cpu.drop(columns=learned), rounds.drop(columns=learned))
    np.testing.assert_allclose(rounds_cpu.loc[0, learned].astype(float), rounds.loc[0, learned].astype(float),
                               rtol=1e-3)
    np.testing.assert_allclose(rounds_cpu["accuracy"], rounds["accuracy"], atol=0.02)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_scenario_run_twice_on_cuda_gives_the_same_tables(two_devices, tmp_path):
    first = _run(tmp_path, dict(two_devices), {"kind": "batched", "device": "cuda"}, "first")
    second = _run(tmp_path, dict(two_devices), {"kind": "batched", "device": "cuda"}, "second")
    for a, b in zip(first, second):
        pd.testing.assert_frame_equal(a, b)


def test_training_on_a_gpu_is_exact_float32_and_leaves_the_processs_settings():
    """exact_float32 sets cuDNN and matrix products to IEEE float32 by deterministic kernels, and gives the user's
    settings back after; torch's flags can be read and set without a GPU, so this runs everywhere."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")   # a user's choice: TF32 matrix products
    tf32, deterministic = torch.backends.cudnn.allow_tf32, torch.backends.cudnn.deterministic
    try:
        with exact_float32(torch.device("cuda")):
            assert torch.get_float32_matmul_precision() == "highest"
            assert not torch.backends.cudnn.allow_tf32 and torch.backends.cudnn.deterministic
            assert not torch.backends.cudnn.benchmark
        assert torch.get_float32_matmul_precision() == "high"
        assert (torch.backends.cudnn.allow_tf32, torch.backends.cudnn.deterministic) == (tf32, deterministic)
        with exact_float32(torch.device("cpu")):   # nothing to do on the CPU
            assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a machine without CUDA")
def test_cuda_without_a_cuda_device_is_a_one_line_error(two_devices, tmp_path, capsys):
    two_devices["executor"] = {"kind": "batched", "device": "cuda"}
    assert main(["run", str(write_yaml(tmp_path / "s.yaml", two_devices)), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "executor.device: cuda, but torch sees no CUDA device" in err
    assert not (tmp_path / "runs").exists()


def test_a_training_device_other_than_cpu_or_cuda_is_refused(two_devices, tmp_path, capsys):
    two_devices["executor"] = {"kind": "serial", "device": "tpu"}
    assert main(["validate", str(write_yaml(tmp_path / "s.yaml", two_devices))]) == 2
    assert "executor.device: Input should be 'cpu' or 'cuda'" in capsys.readouterr().err


def test_moved_reaches_every_tensor_of_a_nested_value():
    from testbed.execution.device import moved

    value = {"params": {"w": torch.ones(2)}, "state": [torch.zeros(1), (torch.ones(1), 3)], "lr": 0.1, "none": None}
    out = moved(value, torch.device("cpu"))
    assert out["params"]["w"] is value["params"]["w"] and out["lr"] == 0.1 and out["none"] is None
    assert isinstance(out["state"], list) and isinstance(out["state"][1], tuple) and out["state"][1][1] == 3


def test_recurrent_models_fall_back_to_one_client_at_a_time(caplog):
    from testbed.data import Dataset
    from testbed.algorithms import Task
    from testbed.execution import BatchedExecutor, SerialExecutor, TrainJob
    from testbed.payload import Dense
    from testbed.models import MODELS

    tokens = torch.randint(0, 80, (40, 12), generator=torch.Generator().manual_seed(0))
    dataset = Dataset("tokens", tokens, tokens[:, 0], tokens[:8], tokens[:8, 0], 80)
    model = MODELS["char_lstm"]((12,), 80, 0.25)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    strategy = FedAvg(LocalSGD(lr=0.5, batch_size=8))
    task = Task(0, 1, 10, 10, Dense(), Dense())
    jobs = [TrainJob(task, params, np.arange(i * 10, i * 10 + 10), (i,)) for i in range(4)]
    with caplog.at_level(logging.WARNING, logger="testbed"):
        batched = BatchedExecutor(model, dataset)
    assert "vmap has no rule" in caplog.text and "one by one" in caplog.text
    serial = SerialExecutor(model, dataset).train(strategy, jobs)
    for batched_result, serial_result in zip(batched.train(strategy, jobs), serial):
        for name in params:
            torch.testing.assert_close(batched_result.update[name], serial_result.update[name])


def test_local_steps_cut_the_schedule_and_the_flops_count():
    """25 samples in batches of 10 are epochs of 10, 10, 5: seven steps take 2 1/3 passes, 60 samples."""
    from testbed.local import minibatches

    cfg = LocalSGD(lr=0.1, batch_size=10, local_steps=7)
    assert cfg.batch_sizes(25) == [10, 10, 5, 10, 10, 5, 10] and cfg.samples_processed(25) == 60
    batches = minibatches(25, cfg, np.random.default_rng(0))
    assert [len(b) for b in batches] == [10, 10, 5, 10, 10, 5, 10]
    assert sorted(torch.cat(batches[:3]).tolist()) == list(range(25))  # each pass is a permutation
    by_epochs = minibatches(25, LocalSGD(lr=0.1, batch_size=10, local_epochs=3), np.random.default_rng(0))
    assert all(torch.equal(a, b) for a, b in zip(batches, by_epochs))  # the same draws as whole epochs


def test_evaluation_in_small_batches_gives_the_whole_batch_numbers():
    """score() runs the model on batches of EVAL_BATCH but sums the loss over blocks of LOSS_BLOCK logits: the
    numbers of one forward pass per block of 1,000, bit for bit (a partial last block included)."""
    import torch.nn.functional as F
    from torch.func import functional_call

    from testbed.functional import EVAL_BATCH, LOSS_BLOCK, score
    from testbed.models import MODELS

    assert EVAL_BATCH < LOSS_BLOCK == 1000
    torch.manual_seed(0)
    model = MODELS["cnn_512"]((1, 28, 28), 10)
    params = dict(model.named_parameters())
    x, y = torch.randn(2345, 1, 28, 28), torch.randint(0, 10, (2345,))
    correct, loss = score(model, params, x, y)
    expected_loss, expected_correct = 0.0, []
    with torch.no_grad():
        for block in range(0, 2345, 1000):
            logits = functional_call(model, params, (x[block : block + 1000],))
            expected_loss += F.cross_entropy(logits, y[block : block + 1000], reduction="sum").item()
            expected_correct.append((logits.argmax(1) == y[block : block + 1000]).numpy())
    assert loss == expected_loss and np.array_equal(correct, np.concatenate(expected_correct))


@pytest.mark.slow
def test_a_ray_worker_killed_mid_round_is_replaced_and_the_tables_are_unbroken(two_devices, tmp_path, monkeypatch):
    pytest.importorskip("ray")
    from testbed.execution.ray import RayExecutor

    two_devices["executor"] = {"kind": "ray", "workers": 2}
    unbroken = _run(tmp_path, dict(two_devices), two_devices["executor"], "unbroken")
    train, replaced = RayExecutor.train, []

    def kill_a_worker_in_round_2(self, strategy, jobs):
        if not (jobs and jobs[0].task.round == 2):
            return train(self, strategy, jobs)
        dead = self.workers[0]
        self.ray.kill(dead)
        results = train(self, strategy, jobs)
        replaced.append(self.workers[0] is not dead)
        return results

    monkeypatch.setattr(RayExecutor, "train", kill_a_worker_in_round_2)
    killed = _run(tmp_path, dict(two_devices), two_devices["executor"], "killed")
    assert replaced == [True]
    for after_a_death, without in zip(killed, unbroken):  # rounds, events: every number, exactly
        pd.testing.assert_frame_equal(after_a_death, without, check_exact=True)


@pytest.mark.slow
def test_a_ray_worker_dying_twice_in_a_round_stops_the_run_in_one_line_with_its_tables_whole(two_devices, tmp_path,
                                                                                              capsys, monkeypatch):
    pytest.importorskip("ray")
    import json

    from testbed.execution.ray import RayExecutor

    train = RayExecutor.train

    def kill_a_worker_and_its_replacement_in_round_2(self, strategy, jobs):
        if jobs and jobs[0].task.round == 2:
            self.ray.kill(self.workers[0])
            start = self._start_worker

            def dead_on_arrival():
                worker = start()
                self.ray.kill(worker)
                return worker

            self._start_worker = dead_on_arrival
        return train(self, strategy, jobs)

    monkeypatch.setattr(RayExecutor, "train", kill_a_worker_and_its_replacement_in_round_2)
    two_devices["executor"] = {"kind": "ray", "workers": 2}
    assert main(["run", str(write_yaml(tmp_path / "s.yaml", two_devices)), "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "executor.kind ray: a worker died in the middle of a round and so did" in err
    run = tmp_path / "two_devices" / "0"
    assert pd.read_csv(run / "rounds.csv")["round"].tolist() == [1]
    assert json.loads((run / "summary.json").read_text())["status"].startswith("failed: executor.kind ray")
