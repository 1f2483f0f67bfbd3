"""executor.workers: a round's clients trained in worker processes give the tables of one process, bit for bit;
the jobs are dealt evenly; a bad count, a dead worker and a worker's error are each said in one line or raised
as they were; no worker outlives its run."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import ROOT, TWO_DEVICES, write_yaml

from testbed.cli import main
from testbed.execution import processes
from testbed.execution.processes import ProcessExecutor, deal, workers_for
from testbed.execution.serial import SerialExecutor
from testbed.execution.threads import torch_threads


def test_jobs_are_dealt_costliest_first_to_the_least_loaded_worker():
    # 5 -> w0; 4 -> w1; 1 -> w1 (4 < 5); 1 -> w0 (5 = 5: the lower); 1 -> w1 (5 < 6)
    assert deal([5, 1, 1, 1, 4], 2) == [[0, 2], [1, 3, 4]]
    # groups of 2, whole: {0,1} costs 6 -> w0, {4} 4 -> w1, {2,3} 2 -> w1 (4 < 6)
    assert deal([5, 1, 1, 1, 4], 2, group=2) == [[0, 1], [2, 3, 4]]
    assert deal([3.0, 1.0], 4) == [[0], [1]]   # no worker without a job
    assert deal([], 3) == []


def test_auto_takes_the_free_cores_a_worker_each_at_the_runs_threads(monkeypatch):
    def machine(cores, load):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
        monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))

    machine(16, 0.2)
    assert workers_for("auto", None, 100) == 16
    assert workers_for("auto", 2, 100) == 8        # 16 cores, 2 threads each
    assert workers_for("auto", None, 10) == 10     # no more workers than the updates of a round
    machine(16, 3.6)
    assert workers_for("auto", None, 100) == 12    # 12.4 cores free
    machine(2, 1.05)
    assert workers_for("auto", None, 10) == 1      # a busy 2-core machine trains in the run's own process
    machine(2, 5.0)
    assert workers_for("auto", 4, 10) == 1
    assert workers_for(3, None, 10) == 3           # a count is taken as it is


@pytest.mark.parametrize(("workers", "expected"), [
    (0, "executor.workers: give a number of worker processes (1, 2, ...) or auto (got 0)"),
    ("lots", "executor.workers: give a number of worker processes (1, 2, ...) or auto (got 'lots')"),
    (1.5, "executor.workers: give a number of worker processes (1, 2, ...) or auto (got 1.5)"),
])
def test_a_bad_worker_count_is_a_one_line_error(two_devices, tmp_path, capsys, workers, expected):
    two_devices["executor"] = {"kind": "serial", "workers": workers}
    assert main(["validate", str(write_yaml(tmp_path / "s.yaml", two_devices))]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and expected in err


def test_worker_processes_on_a_gpu_are_refused(two_devices, tmp_path, capsys):
    two_devices["executor"] = {"kind": "batched", "device": "cuda", "workers": 2}
    assert main(["validate", str(write_yaml(tmp_path / "s.yaml", two_devices))]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "executor.workers: worker processes train on the CPU" in err


def _scenario(algorithm: dict, executor: dict, codec: dict | None = None) -> dict:
    """TWO_DEVICES three times over: 6 devices of 833 digits, 4 a round, 2 rounds of cnn_fedlps."""
    raw = {**TWO_DEVICES, "name": "workers", "algorithm": algorithm, "executor": executor,
           "fleet": {"groups": [dict(group, count=3) for group in TWO_DEVICES["fleet"]["groups"]]},
           "round": {"clients_per_round": 4}}
    return raw | ({"codec": codec} if codec else {})


def _tables(tmp_path, raw: dict, label: str) -> tuple[bytes, bytes]:
    out = tmp_path / label
    assert main(["run", str(write_yaml(tmp_path / f"{label}.yaml", raw)), "--out", str(out), "--quiet"]) == 0
    return (out / "workers/0/rounds.csv").read_bytes(), (out / "workers/0/events.csv").read_bytes()


def _same_with_two_workers(tmp_path, algorithm: dict, executor: dict, codec: dict | None = None) -> bytes:
    one = _tables(tmp_path, _scenario(algorithm, executor, codec), "one")
    two = _tables(tmp_path, _scenario(algorithm, executor | {"workers": 2}, codec), "two")
    assert one[0] == two[0] and one[1] == two[1]  # rounds.csv and events.csv, byte for byte
    return one[0]


@pytest.mark.slow
def test_fedlps_in_two_workers_gives_the_tables_of_one_process(tmp_path):
    """FedLPS: per-device state (importance scores), a learned mask the device uploads with (Result.up)."""
    rounds = _same_with_two_workers(tmp_path, {"name": "fedlps", "mu": 0}, {"kind": "serial"})
    assert rounds.decode().count("\n") == 3   # a header and 2 rounds: the runs did train


@pytest.mark.slow
@pytest.mark.parametrize(("algorithm", "codec"), [({"name": "fadamgt"}, None),
                                                  ({"name": "fedavg"}, {"down": "fp16", "up": "fp16"})],
                         ids=["fadamgt", "fedavg-fp16"])
def test_state_and_codecs_in_two_workers_give_the_tables_of_one_process(tmp_path, algorithm, codec):
    _same_with_two_workers(tmp_path, algorithm, {"kind": "serial"}, codec)


@pytest.mark.slow
def test_batched_groups_dealt_whole_give_the_tables_of_one_process(tmp_path):
    """max_clients 2 of 4 clients a round: each worker vmaps one of the two groups that one process vmaps."""
    _same_with_two_workers(tmp_path, {"name": "fedavg"}, {"kind": "batched", "max_clients": 2})


def _jobs_of_unequal_clients():
    """A tiny image set, cnn_fedlps and five clients of 3 to 19 samples (partial last batches)."""
    from testbed.algorithms import FedAvg, Task
    from testbed.data import Dataset
    from testbed.execution import TrainJob
    from testbed.local import LocalSGD
    from testbed.models import MODELS
    from testbed.payload import Dense

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(60, 1, 28, 28, generator=g), torch.randint(0, 10, (60,), generator=g)
    dataset = Dataset("noise", x, y, x[:6], y[:6], 10)
    model = MODELS["cnn_fedlps"]((1, 28, 28), 10)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    bounds = [0, 7, 26, 29, 45, 60]
    jobs = [TrainJob(Task(i, 1, hi - lo, 2 * (hi - lo), Dense(), Dense()), params, np.arange(lo, hi), (0, 4, 1, i))
            for i, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]
    return model, dataset, FedAvg(LocalSGD(lr=0.1, local_epochs=2, batch_size=4, momentum=0.9)), jobs


def _equal(results, expected):
    assert len(results) == len(expected)
    for got, want in zip(results, expected):
        assert got.metrics == want.metrics
        assert got.update.keys() == want.update.keys()
        assert all(torch.equal(got.update[n], want.update[n]) for n in want.update)


def test_two_workers_train_every_job_to_the_serial_executors_numbers(monkeypatch):

    model, dataset, strategy, jobs = _jobs_of_unequal_clients()
    with torch_threads(1):  # the workers' count
        expected = SerialExecutor(model, dataset).train(strategy, jobs)
    pool = ProcessExecutor(SerialExecutor, model, dataset, 2, None)
    try:
        _equal(pool.train(strategy, jobs), expected)
        sent = []
        monkeypatch.setattr(processes, "_send", lambda pipe, value, shared: sent.append(value[1][0]) or
                            _send(pipe, value, shared))
        _equal(pool.train(strategy, jobs[::-1]), expected[::-1])  # results in the order asked
        assert sent == [None, None]   # the workers kept the strategy: not sent again
    finally:
        pool.close()
    assert not any(p.is_alive() for p in pool.processes) and not os.path.exists(pool.folder)


_send = processes._send


def test_an_error_in_a_worker_is_raised_in_the_run_as_it_was_with_the_workers_traceback():

    model, dataset, strategy, jobs = _jobs_of_unequal_clients()
    bad = type(jobs[0])(jobs[0].task, jobs[0].params, np.array([0, 600]), jobs[0].stream)  # a sample beyond 60
    pool = ProcessExecutor(SerialExecutor, model, dataset, 2, None)
    with pytest.raises(IndexError) as raised:
        pool.train(strategy, [bad] + jobs[1:])
    assert any("raised in worker process" in note and "Traceback" in note for note in raised.value.__notes__)
    assert not any(p.is_alive() for p in pool.processes)   # the pool is closed: its pipes hold a torn round


@pytest.mark.slow
def test_a_worker_killed_mid_run_stops_it_in_one_line_with_its_rounds_kept(tmp_path, capsys, monkeypatch):
    train = ProcessExecutor.train

    def kill_a_worker_in_round_2(self, strategy, jobs):
        if jobs and jobs[0].task.round == 2:
            os.kill(self.processes[0].pid, signal.SIGKILL)
            self.processes[0].join()
        return train(self, strategy, jobs)

    monkeypatch.setattr(ProcessExecutor, "train", kill_a_worker_in_round_2)
    raw = _scenario({"name": "fedavg"}, {"kind": "serial", "workers": 2})
    assert main(["run", str(write_yaml(tmp_path / "s.yaml", raw)), "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("executor.workers: worker process 1 of 2 was killed (SIGKILL: out of memory, or "
                                     "kill -9) in round 2; the rounds before it are kept") in err
    run = tmp_path / "workers" / "0"
    assert (run / "rounds.csv").read_text().count("\n") == 2   # a header and round 1
    assert json.loads((run / "summary.json").read_text())["status"].startswith("failed: executor.workers")


def _descendants(pid: int) -> set[int]:
    """Every process below `pid` (the fork server and the workers it forked), from /proc."""
    parents = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            parents[int(entry)] = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
        except OSError:  # ended meanwhile
            continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _running(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except OSError:
        return False


def _gone(pids: set[int], seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while any(map(_running, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(map(_running, pids))


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the workers through /proc")
@pytest.mark.parametrize("stop", ["ctrl-c", "sigkill"])
def test_no_worker_outlives_its_run(tmp_path, stop):
    """Ctrl-C reaches the whole foreground group: the workers ignore it, the run closes the pool and ends as
    interrupted. A run killed outright leaves workers that end when they find its pipe closed."""
    raw = _scenario({"name": "fedavg"}, {"kind": "serial", "workers": 2}) | {"stop": {"max_rounds": 10_000}}
    file = write_yaml(tmp_path / "s.yaml", raw)
    command = [sys.executable, "-m", "testbed", "run", str(file), "--out", str(tmp_path), "--quiet"]
    # Ctrl-C at its default in the run, as a terminal's foreground job has it: a test run started in the background
    # (`pytest &` in a script) ignores SIGINT, its children inherit that, and the run would rightly ignore Ctrl-C
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=os.environ | {"OMP_NUM_THREADS": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        _stop_and_check(proc, tmp_path / "workers" / "0", stop)
    finally:   # a failed check leaves no run of 10,000 rounds behind (one did, for 48 minutes, on a loaded machine)
        try:
            os.killpg(proc.pid, signal.SIGKILL)   # the run and any worker left in its group
        except ProcessLookupError:
            pass
        proc.wait()


def _stop_and_check(proc: subprocess.Popen, run: Path, stop: str) -> None:
    rounds = run / "rounds.csv"
    deadline = time.monotonic() + 300   # a loaded machine takes minutes to start a run with its pool
    while not (rounds.exists() and rounds.read_text().count("\n") >= 3) and time.monotonic() < deadline:
        time.sleep(0.05)
    below = _descendants(proc.pid)
    assert proc.poll() is None and len(below) >= 3, below   # the fork server and two workers, at least
    if stop == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        summary = json.loads((run / "summary.json").read_text())
        assert summary["status"] == "interrupted"
        assert proc.stderr.read().decode().count("\n") <= 1   # no worker's traceback
    else:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert _gone(below)


def test_tensors_cross_a_pipe_with_their_values_dtypes_shapes_and_strides():
    """Whole tensors go out of band as raw bytes, the rest through torch's pickling; either way what arrives is
    what was sent, and a tensor sent twice arrives as one."""
    from multiprocessing import Pipe

    base = torch.arange(12.0).reshape(3, 4)
    sent = {"whole": base, "again": base, "view": base[1:], "transposed": base.t(), "empty": torch.zeros(0, 3),
            "flags": torch.tensor([True, False]), "ids": torch.arange(5), "half": torch.ones(3, dtype=torch.float16),
            "bfloat16": torch.ones(2, dtype=torch.bfloat16), "parameter": torch.nn.Parameter(torch.ones(2)),
            "nested": [{"x": torch.full((1, 5), 2.0)}]}
    here, there = Pipe()
    processes._send(here, sent, {})
    got = processes._receive(there, {})
    assert got["again"] is got["whole"]
    assert isinstance(got["parameter"], torch.nn.Parameter) and got["parameter"].requires_grad
    for name in ("whole", "view", "transposed", "empty", "flags", "ids", "half", "bfloat16"):
        assert got[name].dtype == sent[name].dtype and got[name].stride() == sent[name].stride(), name
        assert torch.equal(got[name], sent[name]), name
    assert torch.equal(got["nested"][0]["x"], sent["nested"][0]["x"])
    got["whole"] += 1   # what arrives is the receiver's to change
    assert torch.equal(base, torch.arange(12.0).reshape(3, 4))


def test_the_workers_logits_score_as_one_process_does():
    """Evaluation with executor.workers: the workers compute the test set's logits in shares that start at
    multiples of EVAL_BATCH (the test set travels as a reference to their mapped copy), the run scores them:
    the very hits and summed loss of score() in one process, on 2,345 samples (a last share and batch cut short)."""
    from testbed.data import Dataset
    from testbed.functional import score

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 5))
    params = {n: p.detach() for n, p in model.named_parameters()}
    x, y = torch.randn(2345, 3, 4), torch.randint(0, 5, (2345,))
    dataset = Dataset("blobs", x[:50], y[:50], x, y, num_classes=5)
    with torch_threads(1):   # the workers' count
        expected = score(model, params, x, y)
    pool = ProcessExecutor(SerialExecutor, model, dataset, 2, None)
    try:
        correct, loss = score(model, params, x, y, pool.logits)
        assert (correct == expected[0]).all() and loss == expected[1]
        other = x.flip(0)   # not the test set: sent down the pipes, the same numbers
        assert score(model, params, other, y, pool.logits)[1] == score(model, params, other, y)[1]
    finally:
        pool.close()
