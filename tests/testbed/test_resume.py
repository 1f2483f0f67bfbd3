"""Checkpoint and resume: a run killed at any point and resumed ends with the tables of a run never stopped;
a diverging run stops with one line and keeps its rows."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import ROOT, run_killed_after, tiny_blobs, tiny_scenario, write_yaml

import testbed.data
from testbed import checkpoint
from testbed import scenario as sc
from testbed.cli import main
from testbed.errors import TestbedError
from testbed.runner import run_scenario

TABLES = ("rounds.csv", "events.csv")

# `testbed run` in a child process, with the tests' tiny data set registered (a few ms a round)
LAUNCH = ("import sys, helpers, testbed.data; testbed.data.DATASETS['tiny_blobs'] = helpers.tiny_blobs; "
          "from testbed.cli import main; sys.exit(main(sys.argv[1:]))")


def _tables(run) -> list[bytes]:
    return [(run / t).read_bytes() for t in TABLES]


def _rows(path) -> int:
    return max(0, path.read_bytes().count(b"\n") - 1) if path.exists() else 0


@pytest.mark.parametrize("kill", [signal.SIGKILL, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)],
                         ids=["SIGKILL", "SIGTERM"])
def test_a_killed_run_resumes_to_the_tables_of_an_unbroken_run(kill, tmp_path, monkeypatch):
    """SIGKILL leaves no summary; SIGTERM is taken as Ctrl-C: the tables kept, the run marked interrupted, exit
    code 130. Either way --resume ends with the tables of a run never stopped."""
    raw = tiny_scenario({"name": "fedavgm", "server_lr": 1.0, "server_momentum": 0.5}, rounds=150)
    raw["fleet"]["groups"][1]["availability"] = {"kind": "markov", "mean_on_s": 3, "mean_off_s": 1}
    file = write_yaml(tmp_path / "tiny.yaml", raw | {"eval": {"every_rounds": 3}, "checkpoint": {"every_rounds": 4}})
    # one thread: two would contend with the other tests for 2 cores, ten times slower
    env = os.environ | {"OMP_NUM_THREADS": "1",
                        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}

    def testbed_run(out: str, *more: str):
        command = [sys.executable, "-c", LAUNCH, "run", str(file), "--out", str(tmp_path / out), "--quiet", *more]
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the child processes: the same arithmetic
    try:
        reference, _ = run_scenario(sc.load(file), str(file), tmp_path / "unbroken", quiet=True)
    finally:
        torch.set_num_threads(threads)
    proc = testbed_run("killed")
    run = tmp_path / "killed" / "tiny" / "0"
    deadline = time.monotonic() + 120
    while _rows(run / "rounds.csv") < 20 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, kill)
    code = proc.wait()
    killed_at = checkpoint.load(run, (run / "scenario.resolved.yaml").read_text()).round
    assert 16 <= killed_at < 150
    if kill == signal.SIGKILL:
        assert not (run / "summary.json").exists()
    else:
        assert code == 130 and json.loads((run / "summary.json").read_text())["status"] == "interrupted"
        assert proc.stderr.read().decode().count("\n") == 1

    resumed = testbed_run("killed", "--resume")
    assert resumed.wait() == 0, resumed.stderr.read()
    assert _tables(run) == _tables(reference)
    assert (run / "summary.json").read_text() == (reference / "summary.json").read_text()


def _run_in_process(raw, out, resume=False, stop_after_round=None):
    """Run through run_scenario; stop_after_round: die right after that round's rows are written, as a kill
    would (no summary, no final checkpoint)."""
    if stop_after_round is not None:
        assert not resume, "a killed run starts from scratch here"
        return run_killed_after(raw, out, stop_after_round)
    return run_scenario(sc.validate(raw, "test"), "test", out, quiet=True, resume=resume)


# strategies that keep per-device state in the client store: FedLPS's importance scores and P-UCBV bandits
# (spilled to disk beyond one device in memory), FAdamGT's per-device moments and tracking variables
KEEPERS = {
    "fedlps_spilled": ({"name": "fedlps"}, {"max_in_memory": 1}),
    "fadamgt": ({"name": "fadamgt"}, {}),
}


@pytest.mark.parametrize("case", sorted(KEEPERS))
def test_per_device_state_survives_a_resume_and_torn_rows_are_cut(case, tmp_path, monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    algorithm, device_state = KEEPERS[case]
    raw = tiny_scenario(algorithm, rounds=7) | {"device_state": device_state, "checkpoint": {"every_rounds": 3}}
    reference, summary = _run_in_process(raw, tmp_path / "unbroken")

    _run_in_process(raw, tmp_path / "broken", stop_after_round=5)  # checkpoint at 3; rows of 4 and 5 written
    run = tmp_path / "broken" / "tiny" / "0"
    saved = checkpoint.load(run, (run / "scenario.resolved.yaml").read_text())
    assert saved.round == 3 and not saved.finished and len(saved.state.clients) == 2  # both devices keep state
    assert list(pd.read_csv(run / "rounds.csv")["round"]) == [1, 2, 3, 4, 5]
    with open(run / "rounds.csv", "ab") as f:
        f.write(b"6,5.0")  # a row torn by a kill in mid-write
    assert _run_in_process(raw, tmp_path / "broken", resume=True) == (run, summary)
    assert _tables(run) == _tables(reference)


def test_resuming_without_the_stores_contents_would_not_give_the_same_tables(tmp_path, monkeypatch):
    """The check above can fail: a checkpoint that lost FedLPS's per-device state resumes to other tables."""
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    raw = tiny_scenario({"name": "fedlps"}, rounds=7) | {"checkpoint": {"every_rounds": 3}}
    reference, _ = _run_in_process(raw, tmp_path / "unbroken")
    _run_in_process(raw, tmp_path / "broken", stop_after_round=4)
    run = tmp_path / "broken" / "tiny" / "0"
    saved = torch.load(run / checkpoint.FILE, weights_only=False)
    saved["state"].clients.clear()
    torch.save(saved, run / checkpoint.FILE)
    _run_in_process(raw, tmp_path / "broken", resume=True)
    assert _tables(run)[1] != _tables(reference)[1]


def test_resume_of_a_finished_run_or_without_a_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    raw = tiny_scenario({"name": "fedavg"}) | {  # accuracy 0.1, 0.133, 0.133, 0.133, 0.133, 0.167, ...
        "stop": {"max_rounds": 8, "target_accuracy": 0.16, "stop_at_target": True}}
    run, summary = _run_in_process(raw, tmp_path)
    tables = _tables(run)
    stopped_at = len(pd.read_csv(run / "rounds.csv"))
    assert checkpoint.load(run, (run / "scenario.resolved.yaml").read_text()).finished
    # a finished run resumes to itself: no round is played again, none after its stop is added
    assert _run_in_process(raw, tmp_path, resume=True) == (run, summary)
    assert _tables(run) == tables and stopped_at == 6
    # no checkpoint: --resume starts from round 1
    (run / checkpoint.FILE).unlink()
    assert _run_in_process(raw, tmp_path, resume=True) == (run, summary) and _tables(run) == tables


def test_a_checkpoint_of_another_scenario_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    file = write_yaml(tmp_path / "tiny.yaml", tiny_scenario({"name": "fedavg"}, rounds=2))
    assert main(["run", str(file), "--out", str(tmp_path), "--quiet"]) == 0
    before = _tables(tmp_path / "tiny" / "0")
    assert main(["run", str(file), "--out", str(tmp_path), "--quiet", "--resume", "--set", "client.lr=0.5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "checkpoint.pt: the checkpoint belongs to another version" in err
    assert _tables(tmp_path / "tiny" / "0") == before


class _RunsCode:
    """What a hostile checkpoint could carry: unpickling it calls os.system."""

    def __reduce__(self):
        return (os.system, ("touch hacked",))


def test_a_checkpoint_that_would_run_code_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    monkeypatch.chdir(tmp_path)
    file = write_yaml(tmp_path / "tiny.yaml", tiny_scenario({"name": "fedavg"}, rounds=2))
    assert main(["run", str(file), "--out", str(tmp_path), "--quiet"]) == 0
    run = tmp_path / "tiny" / "0"
    fields = torch.load(run / checkpoint.FILE, weights_only=False)
    torch.save(fields | {"protocol": {"payload": _RunsCode()}}, run / checkpoint.FILE)
    before = _tables(run)
    assert main(["run", str(file), "--out", str(tmp_path), "--quiet", "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "checkpoint.pt: the checkpoint holds Python objects" in err
    assert "(posix.system)" in err and "could run code" in err
    assert not (tmp_path / "hacked").exists() and _tables(run) == before


def test_spilled_device_states_are_read_without_running_code(tmp_path):
    from testbed.store import ClientStore

    store = ClientStore(max_in_memory=1, folder=tmp_path)
    store[0], store[1] = {"m": torch.ones(2), "n": np.arange(3)}, {"m": torch.zeros(2)}  # device 0 spills
    assert torch.equal(store[0]["m"], torch.ones(2)) and store[0]["n"].tolist() == [0, 1, 2]
    store[1] = {"m": torch.zeros(2)}
    torch.save({"evil": _RunsCode()}, next(tmp_path.glob("*")))  # device 0's file, spilled again
    with pytest.raises(TestbedError, match="spilled device state holds Python objects"):
        store[0]
    assert not (tmp_path / "hacked").exists()


def test_a_table_shorter_than_its_checkpoint_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    file = write_yaml(tmp_path / "tiny.yaml", tiny_scenario({"name": "fedavg"}, rounds=2))
    assert main(["run", str(file), "--out", str(tmp_path), "--quiet"]) == 0
    rounds = tmp_path / "tiny" / "0" / "rounds.csv"
    rounds.write_bytes(rounds.read_bytes()[:-10])
    assert main(["run", str(file), "--out", str(tmp_path), "--quiet", "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rounds.csv: shorter than its checkpoint says" in err


def test_a_nan_training_loss_stops_the_run_between_evaluations(two_devices, tmp_path, capsys):
    two_devices["client"]["lr"] = 1e6
    two_devices["eval"] = {"every_rounds": 5}  # round 1 is not evaluated: its training loss must catch it
    file = write_yaml(tmp_path / "s.yaml", two_devices)
    assert main(["run", str(file), "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: round 1: the model diverged (training loss nan); lower client.lr")
    run = tmp_path / "two_devices" / "0"
    rounds = pd.read_csv(run / "rounds.csv")
    assert list(rounds["round"]) == [1] and rounds["train_loss"].isna().all() and rounds["loss"].isna().all()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"].startswith("failed: round 1: the model diverged")


def test_checkpoints_are_replaced_atomically(tmp_path):
    target = tmp_path / "f.json"
    target.write_bytes(b"old")
    checkpoint.write_atomically(target, b"new")
    assert target.read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["f.json"]
    with pytest.raises(TestbedError, match="unreadable checkpoint"):
        (tmp_path / checkpoint.FILE).write_bytes(b"torn")
        checkpoint.load(tmp_path, "")


def test_the_progress_bar_of_a_resumed_run_counts_the_uplink_it_kept(tmp_path):
    from types import SimpleNamespace

    from testbed.progress import Progress
    from testbed.runner import kept_rows

    (tmp_path / "rounds.csv").write_text("round,bytes_up,accuracy\n1,1000,0.5\n2,2500,\n")
    scenario = SimpleNamespace(name="s", stop=SimpleNamespace(max_rounds=5))
    with Progress(scenario, 2, kept_rows(tmp_path), True, lambda row, events: None, None, []) as progress:
        assert progress.uplink == 3500 and progress.bar.n == 2
