"""--track mlflow, read back with MlflowClient: the metrics' histories at step = round, the scenario as parameters,
the summary, the files, the experiment of a sweep's runs, the runs' ends; a server that does not answer."""
import dataclasses
import socket
import time

import pytest
from tracker_cases import EXPECTED, FLAT, NEVER, ROWS, SUMMARY, play, tracked_run

from testbed.errors import TestbedError
from testbed.trackers import Trackers

pytest.importorskip("mlflow")
MANY = {"p": {f"k{i:03}": i for i in range(250)}}  # more than a batch of 100 parameters


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One SQLite store (made once: its tables take a second or two; each run that logged takes MLflow a second to
    end, joining its logging thread) holding: quickstart/0 with no target (the default store, out/mlflow.db, made
    while the current folder is another, `cwd`, which must stay empty), two runs of a sweep named by the folder, a
    failed, an interrupted run and one whose logging broke at round 2. Returns (out, the client, run name -> run
    id)."""
    from mlflow import MlflowClient

    out = tmp_path_factory.mktemp("mlflow") / "runs"
    out.mkdir()
    (out.parent / "cwd").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        mp.chdir(out.parent / "cwd")   # where MLflow's own default would put ./mlflow.db and ./mlruns
        run = tracked_run(out)
        play(Trackers(["mlflow"], run), run)
        for name in ("sweep-fedavg/0", "sweep-fedprox/0"):
            run = dataclasses.replace(tracked_run(out, group="sweep", name=name), params=MANY)
            play(Trackers([f"mlflow={out}"], run), run)
        for name, end in (("failed/0", "failed: the data is gone"), ("interrupted/0", "interrupted")):
            trackers = Trackers([f"mlflow={out}"], dataclasses.replace(tracked_run(out, name=name), scenario="bad"))
            trackers.start()  # no rows
            trackers.close(end)
        run = dataclasses.replace(tracked_run(out, name="broken/0"), scenario="bad")
        mp.setattr("testbed.trackers.mlflow.FLUSH_S", 0.0)  # each round sent as it comes: round 2's send breaks
        trackers = Trackers([f"mlflow={out}"], run)
        trackers.start()
        trackers.log(ROWS[0])
        mp.setattr(trackers.live[0].client, "log_batch", lambda *a, **k: 1 / 0)
        trackers.log(ROWS[1])
        trackers.log(ROWS[2])
        assert trackers.live == []
    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    ids = {r.info.run_name: r.info.run_id for r in client.search_runs(
        [e.experiment_id for e in client.search_experiments()])}
    return out, client, ids


def test_the_rounds_go_in_one_batch_every_few_seconds(store, monkeypatch):
    out, _, _ = store
    run = tracked_run(out, name="batched/0")
    trackers = Trackers([f"mlflow={out}"], run)
    trackers.start()
    client, sent = trackers.live[0].client, []
    monkeypatch.setattr(client, "log_batch", lambda run_id, metrics=(), **kw: sent.append(
        sorted({m.step for m in metrics})))
    for row in ROWS:
        trackers.log(row)
    assert sent == []  # within FLUSH_S: buffered
    trackers.live[0].flush()
    assert sent == [[1, 2, 3]]
    trackers.close("interrupted")


def test_each_metric_at_its_rounds_nans_left_out(store):
    _, client, ids = store
    for key, expected in EXPECTED.items():
        history = client.get_metric_history(ids["quickstart/0"], key)
        assert sorted((m.step, m.value) for m in history) == expected, key
    logged = set(client.get_run(ids["quickstart/0"]).data.metrics)
    assert not NEVER & logged


def test_the_scenario_as_flat_parameters_the_long_one_cut(store):
    from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

    _, client, ids = store
    params = client.get_run(ids["quickstart/0"]).data.params
    expected = {k: v if isinstance(v, str) else __import__("json").dumps(v) for k, v in FLAT.items()}
    assert params == {**expected, "description": "x" * MAX_PARAM_VAL_LENGTH}
    assert client.get_run(ids["sweep-fedavg/0"]).data.params == {f"p.k{i:03}": str(i) for i in range(250)}


def test_the_summary_the_files_and_the_end(store):
    _, client, ids = store
    run = client.get_run(ids["quickstart/0"])
    assert run.info.status == "FINISHED"
    assert {k: v for k, v in run.data.metrics.items() if k.startswith("summary/")} == {
        "summary/seed": 0.0, "summary/final_accuracy": 0.75, "summary/best_accuracy": 0.75,
        "summary/sim_time_s": 4.0, "summary/bytes_up_total": 250.0, "summary/time_to_accuracy_s.0.5": 1.5}
    assert [m.step for m in client.get_metric_history(run.info.run_id, "summary/final_accuracy")] == [3]
    tags = run.data.tags
    assert (tags["summary/status"], tags["summary/scenario"], tags["testbed.scenario"]) == (
        "completed", "quickstart", "quickstart")
    assert tags["mlflow.runName"] == "quickstart/0" and tags["testbed.group"] == ""
    assert sorted(a.path for a in client.list_artifacts(run.info.run_id)) == ["plots", "rounds.csv"]
    assert [a.path for a in client.list_artifacts(run.info.run_id, "plots")] == ["plots/a.png"]
    assert SUMMARY["status"] == "completed"


def test_the_default_store_is_in_out_and_nothing_goes_into_the_current_folder(store):
    """out/mlflow.db and its files in out/mlartifacts/<experiment>, not MLflow's own ./mlflow.db and ./mlruns."""
    out, client, ids = store
    experiment = client.get_experiment_by_name("quickstart")
    assert experiment.artifact_location == (out / "mlartifacts" / "quickstart").as_uri()
    assert (out / "mlartifacts" / "quickstart" / ids["quickstart/0"] / "artifacts" / "plots" / "a.png").is_file()
    assert list((out.parent / "cwd").iterdir()) == []


def test_a_sweeps_runs_are_one_experiment_named_by_it(store):
    _, client, ids = store
    sweep = client.get_experiment_by_name("sweep").experiment_id
    assert {client.get_run(ids[n]).info.experiment_id for n in ("sweep-fedavg/0", "sweep-fedprox/0")} == {sweep}
    assert client.get_run(ids["sweep-fedavg/0"]).data.tags["testbed.group"] == "sweep"
    assert client.get_run(ids["quickstart/0"]).info.experiment_id != sweep


@pytest.mark.parametrize("name, status, tag", [("failed/0", "FAILED", "failed: the data is gone"),
                                               ("interrupted/0", "KILLED", "interrupted"),
                                               ("broken/0", "FAILED", "failed: ZeroDivisionError: division by zero")])
def test_a_run_that_ends_badly_is_marked_so(store, name, status, tag):
    _, client, ids = store
    run = client.get_run(ids[name])
    assert (run.info.status, run.data.tags["testbed.status"]) == (status, tag)
    if name == "broken/0":  # what it logged before it broke is kept
        assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "sim_time_s")] == [(1, 1.5)]


def test_a_server_that_does_not_answer_fails_start_in_one_line_fast(tmp_path, monkeypatch):
    import os

    for name in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT"):
        monkeypatch.setenv(name, "x")  # restored after the test: start() sets them where unset
        monkeypatch.delenv(name)
    with socket.socket() as s:  # a port bound but not listening: a connection is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        start = time.perf_counter()
        with pytest.raises(TestbedError) as err:
            Trackers([f"mlflow=http://127.0.0.1:{port}"], tracked_run(tmp_path)).start()
        assert time.perf_counter() - start < 5
    assert str(err.value) == (f"--track mlflow=http://127.0.0.1:{port}: no MLflow server answers at 127.0.0.1:{port} "
                              f"(ConnectionRefusedError: Connection refused); start one (mlflow server --port {port})"
                              f" or name another: --track mlflow=URI")
    assert (os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"], os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"]) == ("2", "10")


@pytest.mark.parametrize("target, env, uri", [
    (None, None, "sqlite:///{out}/mlflow.db"),   # the default: --out
    (None, "http://example.org:5000", "http://example.org:5000"),
    ("{tmp}/store", "http://example.org:5000", "sqlite:///{tmp}/store/mlflow.db"),
    ("{tmp}/one.db", None, "sqlite:///{tmp}/one.db"),
    ("sqlite:///{tmp}/two.db", None, "sqlite:///{tmp}/two.db"),
    ("databricks", None, "databricks"),
])
def test_where_the_store_is(tmp_path, monkeypatch, target, env, uri):
    from testbed.trackers.mlflow import store

    monkeypatch.chdir(tmp_path)
    if env:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", env)
    else:
        monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    target = target and target.format(tmp=tmp_path)
    assert store(target, tmp_path / "runs")[0] == uri.format(tmp=tmp_path, out=tmp_path / "runs")


@pytest.mark.slow
def test_processes_opening_a_new_store_at_once_all_start(tmp_path):
    """A sweep's --jobs open --out's new store together: MLflow making its tables twice at once fails ("duplicate
    column name", 2 of 3 processes without the lock), so the store's opening is locked (mlflow.opening)."""
    import subprocess
    import sys

    from helpers import ROOT

    code = ("import dataclasses, sys; from pathlib import Path; from tracker_cases import tracked_run; "
            "from testbed.trackers import Trackers; out = Path(sys.argv[1]); "
            "run = dataclasses.replace(tracked_run(out / sys.argv[2]), name=sys.argv[2] + '/0', out=out); "
            "t = Trackers(['mlflow'], run); t.start(); t.close('interrupted')")
    env = {**__import__("os").environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests' / 'trackers'}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    jobs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), f"r{i}"], cwd=tmp_path, env=env,
                             stderr=subprocess.PIPE, text=True) for i in range(3)]
    errors = [job.communicate(timeout=120)[1] for job in jobs]
    assert [job.returncode for job in jobs] == [0, 0, 0], errors
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("quickstart").experiment_id])
    assert sorted(r.info.run_name for r in runs) == ["r0/0", "r1/0", "r2/0"]
