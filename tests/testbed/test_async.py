"""Asynchronous protocols on the simulated clock, checked against timelines and model sequences computed by hand.

Three devices on the tiny data set (20 samples each), logreg (21 fp32 parameters: 84 bytes), 3 local steps of
10 samples: 3 x 18 multiply-adds x 30 samples = 1,620 multiply-adds (the tables' FLOPs, as fvcore counts them)
= 3,240 floating-point operations, the figure the devices' FLOP/s divide. No latency.
    A: 3,240 FLOP/s, 84 B/s each way       -> download 1 s, compute 1 s, upload 1 s: a task takes 3 s
    B: 1,620 FLOP/s, 84 B/s each way       -> 1 + 2 + 1 = 4 s
    C:   810 FLOP/s, 42 B/s each way       -> 2 + 4 + 2 = 8 s
Online: A on [0, 3) and [6, inf); B on [0, 8) and [20, inf); C on [2.5, inf). Concurrency 2, buffer 2.
    t = 0   A and B are the only devices online: both start on version 0. A [0, 3], B [0, 4].
    t = 3   A arrives (staleness 0) and goes offline; C, online since 2.5, starts on v0: [3, 11].
    t = 4   B arrives (0): the buffer holds 2, version 1. B is the only idle device online: [4, 8] on v1.
    t = 8   B arrives (0) and goes offline; A, back since 6, starts on v1: [8, 11].
    t = 11  A and C arrive together, in device order: A (0) fills the buffer: version 2; then C, on v0, is
            2 versions old. A and C start on v2: A [11, 14], C [11, 19].
    t = 14  A arrives (0): version 3 from C (2) and A (0). With max_rounds 3 the run ends: C's task is cut
            mid-compute (downloaded [11, 13], computed [13, 14]).
"""
import copy
import math

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import TWO_DEVICES, run_killed_after, tiny_blobs, write_yaml

import testbed.data
from testbed import scenario as sc
from testbed.cli import main
from testbed.engine import Engine

TASK_FLOPS = 1620  # multiply-adds, as rounds.csv counts them
MODEL_BYTES = 84


@pytest.fixture(autouse=True)
def _tiny_data(monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)


def _group(name, flops, link, trace):
    return {"profile": "raspberry_pi_4", "count": 1, "peak_flops": flops, "efficiency": 1.0, "down_Bps": link,
            "up_Bps": link, "latency_s": 0.0, "availability": {"kind": "trace", "file": trace}}


def three_devices(tmp_path, **protocol) -> dict:
    traces = {"a": [(0, 3), (6, 1e9)], "b": [(0, 8), (20, 1e9)], "c": [(2.5, 1e9)]}
    for name, rows in traces.items():
        (tmp_path / f"{name}.csv").write_text("device,start_s,end_s\n" + "".join(f"{name},{s},{e}\n" for s, e in rows))
    return {"name": "three", "seed": 0, "data": {"name": "tiny_blobs", "partition": {"kind": "iid"}},
            "model": {"name": "logreg"},
            "fleet": {"groups": [_group("a", 3240.0, 84.0, str(tmp_path / "a.csv")),
                                 _group("b", 1620.0, 84.0, str(tmp_path / "b.csv")),
                                 _group("c", 810.0, 42.0, str(tmp_path / "c.csv"))]},
            "protocol": {"kind": "async", "concurrency": 2, "buffer_size": 2} | protocol,
            "client": {"lr": 0.1, "batch_size": 10, "local_steps": 3},
            "algorithm": {"name": "fedavg"}, "stop": {"max_rounds": 3}}


def simulate(raw, wrap_executor=None):
    exp = sc.build(sc.validate(raw, "test"))
    if wrap_executor:
        exp.executor = wrap_executor(exp.executor)
    records, events = [], []
    Engine(exp, lambda record, rows: (records.append(record), events.extend(rows))).run()
    return pd.DataFrame(records), pd.DataFrame(events)


def _tasks(events) -> list[tuple]:
    """(device, version, start, end, outcome, staleness) of each task, in order of start."""
    grouped = events.groupby("task")
    tasks = [(g["device"].iloc[0], g["version"].iloc[0], g["start_s"].min(), g["end_s"].max(), g["outcome"].iloc[0],
              g["staleness"].iloc[0]) for _, g in grouped]
    assert [t[2] for t in tasks] == sorted(t[2] for t in tasks)  # numbered in order of dispatch
    return tasks


def test_three_device_async_timeline_by_hand(tmp_path):
    rounds, events = simulate(three_devices(tmp_path))
    assert list(rounds["round"]) == [1, 2, 3]
    assert list(rounds["t_start_s"]) == [0, 4, 11] and list(rounds["t_end_s"]) == [4, 11, 14]
    assert list(rounds["selected"]) == [3, 2, 2] and list(rounds["arrived"]) == [2, 2, 2]
    assert list(rounds["staleness_mean"]) == [0, 0, 1] and list(rounds["staleness_max"]) == [0, 0, 2]
    assert list(rounds["unfinished"]) == [0, 0, 1] and list(rounds["dropped"]) == [0, 0, 0]
    nan = math.nan
    expected = [(0, 0, 0, 3, "done", 0), (1, 0, 0, 4, "done", 0), (2, 0, 3, 11, "done", 2),
                (1, 1, 4, 8, "done", 0), (0, 1, 8, 11, "done", 0), (0, 2, 11, 14, "done", 0),
                (2, 2, 11, 14, "unfinished", nan)]
    got = _tasks(events)
    assert [t[:5] for t in got] == [t[:5] for t in expected]
    assert [t[5] for t in got] == pytest.approx([t[5] for t in expected], nan_ok=True)
    cut = events[events["outcome"] == "unfinished"]
    assert list(zip(cut["phase"], cut["start_s"], cut["end_s"])) == [("download", 11, 13), ("compute", 13, 14)]
    # aggregation 3 carries C's first task (done) and its cut second one: 2 s of its 4 s compute are lost
    last = rounds.iloc[-1]
    assert last["flops"] == 2 * TASK_FLOPS + TASK_FLOPS // 4 and last["wasted_flops"] == TASK_FLOPS // 4
    assert last["bytes_down"] == 3 * MODEL_BYTES and last["wasted_bytes"] == MODEL_BYTES
    assert rounds["bytes_up"].sum() == 6 * MODEL_BYTES


def test_periodic_aggregation_by_hand(tmp_path):
    """The three devices with no buffer trigger, aggregating every 5 s whatever has arrived.
    t = 3, 4   A and B arrive (v0); C starts at 3 on v0, B again at 4 on v0.    t = 5  version 1 from A and B.
    t = 8      B arrives, 1 version old; A (back since 6) starts on v1.          t = 10 version 2 from B alone.
    t = 11     A (v1) and C (v0) arrive, 1 and 2 versions old; both start on v2.
    t = 14     A arrives (v2, 0 old) and starts again.    t = 15  version 3 from A, C, A; A and C are cut."""
    raw = three_devices(tmp_path, buffer_size=None, period_s=5.0)
    rounds, events = simulate(raw)
    assert list(rounds["t_end_s"]) == [5, 10, 15] and list(rounds["arrived"]) == [2, 1, 3]
    assert list(rounds["staleness_mean"]) == [0, 1, 1] and list(rounds["staleness_max"]) == [0, 1, 2]
    assert list(rounds["unfinished"]) == [0, 0, 2]
    got = [t[:5] for t in _tasks(events)]
    assert got == [(0, 0, 0, 3, "done"), (1, 0, 0, 4, "done"), (2, 0, 3, 11, "done"), (1, 0, 4, 8, "done"),
                   (0, 1, 8, 11, "done"), (0, 2, 11, 14, "done"), (2, 2, 11, 15, "unfinished"),
                   (0, 2, 14, 15, "unfinished")]


def test_offline_mid_upload_drops_at_that_instant_and_a_stale_update_is_never_trained(tmp_path):
    """A now goes offline at 2.5, mid-upload; max_staleness 0.
    t = 2.5  A drops; C (online from 2.5) starts on v0: [2.5, 10.5].
    t = 4    B arrives; B again on v0: [4, 8].      t = 8  B arrives: version 1 from B's two updates; A on v1.
    t = 10.5 C arrives 1 version old: discarded (stale); C starts again on v1: [10.5, 18.5].
    t = 11   A arrives; A again on v1: [11, 14].    t = 14 A arrives: version 2; C's task is cut."""
    raw = three_devices(tmp_path, max_staleness=0) | {"stop": {"max_rounds": 2}}
    (tmp_path / "a.csv").write_text("device,start_s,end_s\na,0,2.5\na,6,1e9\n")
    trained = []

    class Recording:
        def __init__(self, executor):
            self.executor = executor

        def train(self, strategy, jobs):
            trained.append([job.task.device for job in jobs])
            return self.executor.train(strategy, jobs)

        def close(self):
            self.executor.close()

    rounds, events = simulate(raw, Recording)
    expected = [(0, 0, 0, 2.5, "dropped"), (1, 0, 0, 4, "done"), (2, 0, 2.5, 10.5, "stale"),
                (1, 0, 4, 8, "done"), (0, 1, 8, 11, "done"), (2, 1, 10.5, 14, "unfinished"),
                (0, 1, 11, 14, "done")]
    assert [t[:5] for t in _tasks(events)] == expected
    dropped = events[events["outcome"] == "dropped"]
    assert list(zip(dropped["phase"], dropped["end_s"])) == [("download", 1), ("compute", 2), ("upload", 2.5)]
    assert trained == [[1, 1], [0, 0]]  # C's stale update cost its time, bytes and FLOPs, but no training
    assert list(rounds["t_end_s"]) == [8, 14] and list(rounds["selected"]) == [4, 3]
    assert list(rounds["dropped"]) == [1, 0] and list(rounds["stale"]) == [0, 1]
    assert list(rounds["unfinished"]) == [0, 1]
    # wasted: A's task (84 B down, 3,240 FLOP, 0.5 s x 84 B/s of upload); C's stale task whole, then its cut
    # one: 84 B down and 1.5 of its 4 s of compute
    assert list(rounds["wasted_flops"]) == [TASK_FLOPS, TASK_FLOPS + TASK_FLOPS * 3 // 8]
    assert list(rounds["wasted_bytes"]) == [MODEL_BYTES + 42, 3 * MODEL_BYTES]


class Recording:
    """A strategy that records, per task, the model it trained from and the model it trained, and the server's
    model after every aggregation."""

    def __init__(self, strategy):
        self.strategy, self.tasks, self.models, self.arrivals = strategy, {}, [None], []

    def __getattr__(self, name):
        return getattr(self.strategy, name)

    def finish(self, task, trained, received, stats, opt_state):
        self.tasks[(task.device, task.round)] = ({n: t.clone() for n, t in received.items()},
                                                 {n: t.clone() for n, t in trained.items()})
        return self.strategy.finish(task, trained, received, stats, opt_state)

    def aggregate(self, state, round, arrivals, failures):
        state, metrics = self.strategy.aggregate(state, round, arrivals, failures)
        self.models.append({n: t.clone() for n, t in state.params.items()})
        self.arrivals.append([(a.device, a.task.round) for a in arrivals])
        return state, metrics


def _recorded(raw):
    exp = sc.build(sc.validate(raw, "test"))
    exp.strategy = recorder = Recording(exp.strategy)
    recorder.models[0] = {n: p.detach().clone() for n, p in exp.model.named_parameters()}
    records, events = [], []
    Engine(exp, lambda record, rows: (records.append(record), events.extend(rows))).run()
    return pd.DataFrame(records), pd.DataFrame(events), recorder


def _fast_and_slow(protocol: dict, rounds: int) -> dict:
    """TWO_DEVICES (tasks of 3.5 s and 4 s, always on) on the tiny data, asynchronously."""
    raw = copy.deepcopy(TWO_DEVICES) | {
        "data": {"name": "tiny_blobs", "partition": {"kind": "iid"}}, "model": {"name": "logreg"},
        "client": {"lr": 0.5, "batch_size": 10, "local_steps": 3}, "stop": {"max_rounds": rounds}}
    raw.pop("round")
    return raw | {"protocol": {"kind": "async", "concurrency": 2, "buffer_size": 1} | protocol}


@pytest.mark.parametrize("staleness, weight", [
    ({"kind": "constant"}, lambda tau: 1.0),
    ({"kind": "polynomial", "a": 0.5}, lambda tau: (1 + tau) ** -0.5),
    ({"kind": "hinge", "a": 2.0, "b": 0}, lambda tau: 1.0 if tau <= 0 else 1 / (2.0 * tau + 1)),
])
def test_fedasync_is_the_hand_applied_sequence_of_mixtures(staleness, weight):
    alpha = 0.6
    rounds, events, recorder = _recorded(_fast_and_slow({"mixing": alpha, "staleness": staleness}, rounds=8))
    assert rounds["staleness_max"].max() >= 1  # the slow device's updates arrive stale
    x = recorder.models[0]
    for r, arrived in enumerate(recorder.arrivals, start=1):
        (key,) = arrived
        received, trained = recorder.tasks[key]
        done = events[(events["round"] == r) & (events["outcome"] == "done")].iloc[0]
        version, tau = int(done["version"]), int(done["staleness"])
        for n in x:  # the device trained from the model version it downloaded
            torch.testing.assert_close(received[n], recorder.models[version][n], rtol=0, atol=0)
        a = alpha * weight(tau)
        x = {n: (1 - a) * x[n] + a * trained[n] for n in x}
        for n in x:
            torch.testing.assert_close(recorder.models[r][n], x[n], rtol=0, atol=1e-7)


def test_fedbuff_adds_each_update_times_its_staleness_weight():
    """FedBuff with K = 1 and FedAvg's server (x + D): each aggregation adds the update trained from the version
    its task downloaded, times s(tau) = (1 + tau)^-0.5, by hand."""
    rounds, events, recorder = _recorded(_fast_and_slow({"staleness": {"kind": "polynomial", "a": 0.5}}, rounds=8))
    assert rounds["staleness_max"].max() >= 1  # the slow device's updates arrive stale
    x = recorder.models[0]
    for r, arrived in enumerate(recorder.arrivals, start=1):
        (key,) = arrived
        received, trained = recorder.tasks[key]
        tau = int(events[(events["round"] == r) & (events["outcome"] == "done")].iloc[0]["staleness"])
        x = {n: x[n] + (1 + tau) ** -0.5 * (trained[n] - received[n]) for n in x}
        for n in x:
            torch.testing.assert_close(recorder.models[r][n], x[n], rtol=0, atol=1e-7)


def test_fedbuff_with_buffer_equal_to_concurrency_and_no_stragglers_is_a_synchronous_round():
    raw = copy.deepcopy(TWO_DEVICES) | {
        "data": {"name": "tiny_blobs", "partition": {"kind": "iid"}}, "model": {"name": "logreg"},
        "client": {"lr": 0.5, "batch_size": 10, "local_steps": 3}, "stop": {"max_rounds": 5},
        "algorithm": {"name": "fedadam", "server_lr": 0.1}}
    raw["fleet"]["groups"][1] = dict(raw["fleet"]["groups"][0])  # two identical devices: they arrive together
    sync_rounds, sync_events, sync = _recorded(raw)
    buffered = {k: v for k, v in raw.items() if k != "round"} | {
        "protocol": {"kind": "async", "concurrency": 2, "buffer_size": 2}}
    async_rounds, async_events, fedbuff = _recorded(buffered)
    assert list(async_rounds["staleness_max"]) == [0] * 5
    assert list(async_rounds["t_end_s"]) == list(sync_rounds["t_end_s"])
    for mine, theirs in zip(fedbuff.models, sync.models, strict=True):
        for n in mine:
            assert torch.equal(mine[n], theirs[n])
    assert list(async_rounds["accuracy"]) == list(sync_rounds["accuracy"])


def _tables(run):
    return [(run / name).read_bytes() for name in ("rounds.csv", "events.csv")]


@pytest.mark.slow
def test_serial_and_batched_executors_give_the_same_async_run(tmp_path):
    raw = three_devices(tmp_path) | {"stop": {"max_rounds": 6}, "eval": {"every_rounds": 2}}
    runs = {}
    for kind in ("serial", "batched"):
        file = write_yaml(tmp_path / f"{kind}.yaml", raw | {"name": kind, "executor": {"kind": kind}})
        assert main(["run", str(file), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
        run = tmp_path / "runs" / kind / "0"
        runs[kind] = pd.read_csv(run / "rounds.csv"), pd.read_csv(run / "events.csv")
    (rounds_a, events_a), (rounds_b, events_b) = runs.values()
    pd.testing.assert_frame_equal(events_a, events_b)
    learned = ["train_loss", "accuracy", "loss"]
    pd.testing.assert_frame_equal(rounds_a.drop(columns=learned), rounds_b.drop(columns=learned))
    for column in learned:
        np.testing.assert_allclose(rounds_a[column], rounds_b[column], rtol=1e-4, atol=2e-3)


@pytest.mark.parametrize("older", [False, True], ids=["checkpoint", "older-checkpoint"])
def test_an_async_run_killed_between_checkpoints_resumes_to_the_tables_of_an_unbroken_run(tmp_path, older):
    """older: the checkpoint as an older testbed wrote it, the server's fields as keys of their own, is read too."""
    from dataclasses import fields

    from testbed.runner import run_scenario

    # Markov availability on both devices: drops, waits for devices to come back, tasks in flight at every
    # checkpoint; a period trigger besides the buffer
    raw = _fast_and_slow({"concurrency": 2, "buffer_size": 2, "period_s": 6.0, "max_staleness": 3}, rounds=40)
    for group in raw["fleet"]["groups"]:
        group["availability"] = {"kind": "markov", "mean_on_s": 6, "mean_off_s": 2}
    raw |= {"checkpoint": {"every_rounds": 4}, "eval": {"every_s": 10.0}}
    reference, summary = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "unbroken", quiet=True)
    unbroken = pd.read_csv(reference / "rounds.csv")
    assert unbroken["dropped"].sum() > 0 and unbroken["arrived"].min() == 0  # drops, and empty periods
    run_killed_after(raw, tmp_path / "broken", 19)
    run = tmp_path / "broken" / "two_devices" / "0"
    from testbed import checkpoint

    saved = checkpoint.load(run, (run / "scenario.resolved.yaml").read_text())
    assert saved.round == 16 and saved.protocol["server"].in_flight  # tasks in flight carried over
    if older:
        server = saved.protocol.pop("server")
        saved.protocol |= {f.name: getattr(server, f.name) for f in fields(server) if f.name != "version"}
        checkpoint.save(run, saved)
    assert run_scenario(sc.validate(raw, "test"), "test", tmp_path / "broken", quiet=True, resume=True) == (
        run, summary)
    assert _tables(run) == _tables(reference)


BAD_ASYNC = {
    "buffer larger than concurrency": ({"concurrency": 2, "buffer_size": 3},
                                       "protocol: buffer_size 3 is more than concurrency 2"),
    "concurrency larger than the fleet": ({"concurrency": 5, "buffer_size": 1},
                                          "protocol.concurrency: 5 is more than the fleet's 3 devices"),
    "negative period": ({"concurrency": 2, "period_s": -1}, "protocol.period_s: Input should be greater than 0"),
    "no trigger": ({"concurrency": 2}, "protocol: set buffer_size (FedBuff's K; 1 for FedAsync) or period_s"),
    "mixing with a buffer": ({"concurrency": 2, "buffer_size": 2, "mixing": 0.5},
                             "protocol: mixing is FedAsync's rule, applied to one update at a time"),
}


@pytest.mark.parametrize("case", sorted(BAD_ASYNC))
def test_bad_async_settings_give_one_line_and_exit_2(case, tmp_path, capsys):
    protocol, expected = BAD_ASYNC[case]
    raw = three_devices(tmp_path)
    raw["protocol"] = {"kind": "async"} | protocol
    file = write_yaml(tmp_path / "bad.yaml", raw)
    assert main(["run", str(file), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {file}: {expected}"), err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("algorithm, expected", [
    ({"name": "scaffold"}, "protocol: scaffold cannot run asynchronously"),
    ({"name": "fedap"}, "protocol: fedap cannot run asynchronously"),
    ({"name": "fedadam"}, None),
])
def test_algorithms_that_cannot_run_asynchronously_are_refused(algorithm, expected, tmp_path, capsys):
    raw = three_devices(tmp_path) | {"algorithm": algorithm}
    if algorithm["name"] == "fedap":
        raw["data"]["server"] = {"fraction": 0.1, "classes": 2}
    file = write_yaml(tmp_path / "s.yaml", raw)
    code = main(["validate", str(file)])
    captured = capsys.readouterr()
    if expected is None:
        assert code == 0 and "async: 2 in flight, aggregating every 2 updates (FedBuff)" in captured.out
    else:
        assert code == 2 and captured.err.count("\n") == 1 and expected in captured.err, captured.err
        runs = "use protocol kind sync, or one of: fedadagrad, fedadam, fedavg, fedavgm, fedprox, fedyogi"
        assert runs in captured.err


def test_fedasync_mixing_needs_a_plain_server(tmp_path, capsys):
    raw = three_devices(tmp_path, buffer_size=1, mixing=0.5) | {"algorithm": {"name": "fedyogi"}}
    assert main(["validate", str(write_yaml(tmp_path / "s.yaml", raw))]) == 2
    assert "protocol.mixing: FedAsync's mixture needs a server that adds the update" in capsys.readouterr().err
