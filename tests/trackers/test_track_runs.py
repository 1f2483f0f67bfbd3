"""--track through the command line and the Python API on real runs: what TensorBoard and MLflow hold equals
rounds.csv row for row; a sweep's runs are one MLflow experiment named by the sweep; a resumed run's totals go on
where they stopped; a tracker that cannot start stops the run before round 1 in one line (exit 2). Where each
tracker keeps a run is said at its start and end (a sweep's and several seeds' runs together), MLflow's default
store goes into --out, not the current folder, and `testbed report` does not count it as a run."""
import json
import os
import socket

import pandas as pd
import pytest
from helpers import run_killed_after, tiny_blobs, tiny_scenario, write_yaml

import testbed
import testbed.data
from testbed.cli import main

pytest.importorskip("tensorboard")
pytest.importorskip("mlflow")


@pytest.fixture
def tiny(monkeypatch, tmp_path) -> dict:
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    return tiny_scenario({"name": "fedavg"}, rounds=4)


def scalars(logdir, tag) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0}).Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def mlflow_runs(store):
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{store}")
    return client, {r.info.run_name: r for r in client.search_runs(
        [e.experiment_id for e in client.search_experiments()])}


def test_a_run_tracked_from_the_command_line_holds_its_rounds(tiny, tmp_path, capsys):
    file = write_yaml(tmp_path / "tiny.yaml", tiny)
    assert main(["run", str(file), "--out", "runs", "--quiet", "--track", "tensorboard",
                 "--track", f"mlflow={tmp_path / 'store'}"]) == 0
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith(("tensorboard", "mlflow"))]
    rounds = pd.read_csv(tmp_path / "runs" / "tiny" / "0" / "rounds.csv")
    expected = [(r, a) for r, a in zip(rounds["round"], rounds["accuracy"])]
    got = scalars(tmp_path / "runs" / "tiny" / "0" / "tensorboard", "round/accuracy")
    assert [r for r, _ in got] == [r for r, _ in expected]
    assert all(abs(a - b) < 1e-6 for (_, a), (_, b) in zip(got, expected))   # TensorBoard keeps float32
    client, runs = mlflow_runs(tmp_path / "store" / "mlflow.db")
    run = runs["tiny/0"]
    history = client.get_metric_history(run.info.run_id, "bytes_up_total")
    assert [(m.step, m.value) for m in history] == list(zip(rounds["round"], rounds["bytes_up"].cumsum()))
    sim = client.get_metric_history(run.info.run_id, "sim_time_s")
    assert [m.value for m in sim] == list(rounds["t_end_s"])
    assert run.data.params["client.lr"] == "0.01" and run.info.status == "FINISHED"
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"rounds.csv", "summary.json", "plots"} <= artifacts
    plots = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert {"plots/report.html", "plots/accuracy_vs_time.png"} <= plots


def test_a_tracked_run_says_where_each_tracker_keeps_it_and_writes_nothing_here(tiny, tmp_path, capsys, clean_env):
    """cwd = tmp_path: the lines' paths are relative to it; MLflow's store goes into --out (runs/), the report of
    runs/ counts the run once (not the copy in MLflow's artifacts), and the W&B reader reads its rounds back."""
    pytest.importorskip("wandb")
    from testbed.trackers.wandb_offline import read_offline_run

    file = write_yaml(tmp_path / "tiny.yaml", tiny)
    assert main(["run", str(file), "--out", "runs", "--track", "tensorboard", "--track", "mlflow",
                 "--track", "wandb"]) == 0
    said = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith(("tensorboard:", "mlflow:", "wandb:"))]
    wandb_run = next((tmp_path / "runs" / "tiny" / "0" / "wandb").glob("offline-run-*")).relative_to(tmp_path)
    assert said == ["tensorboard: logging this run; watch: tensorboard --logdir runs/tiny/0/tensorboard",
                    "mlflow: logging run tiny/0; watch: mlflow ui --backend-store-uri sqlite:///runs/mlflow.db",
                    f"wandb: logging this run offline into {wandb_run}",
                    "tensorboard: logged this run; open: tensorboard --logdir runs/tiny/0/tensorboard",
                    "mlflow: logged run tiny/0; open: mlflow ui --backend-store-uri sqlite:///runs/mlflow.db",
                    f"wandb: kept offline; upload: wandb sync {wandb_run}"]
    assert max(map(len, said)) <= 100
    assert sorted(os.listdir(tmp_path)) == ["runs", "tiny.yaml"]
    assert sorted(os.listdir(tmp_path / "runs")) == ["mlartifacts", "mlflow.db", "tiny"]
    assert list(testbed.report("runs", out="report").tables["tta"]["run"]) == ["tiny/0"]
    rounds = pd.read_csv(tmp_path / "runs" / "tiny" / "0" / "rounds.csv")
    history = read_offline_run("runs/tiny/0", wait_s=20).history
    assert list(history["_step"]) == list(rounds["round"]) and list(history["sim_time_s"]) == list(rounds["t_end_s"])
    assert list(history["accuracy"]) == pytest.approx(list(rounds["accuracy"]))


def test_a_sweeps_runs_are_one_experiment_named_by_the_sweep_and_said_together(tiny, tmp_path, capsys):
    file = write_yaml(tmp_path / "tiny.yaml", tiny)
    testbed.sweep(file, {"client.lr": [0.01, 0.02]}, out="runs", track=["tensorboard", f"mlflow={tmp_path / 'store'}"])
    client, runs = mlflow_runs(tmp_path / "store" / "mlflow.db")
    assert sorted(runs) == ["tiny-0.01/0", "tiny-0.02/0"]
    experiments = {client.get_experiment(r.info.experiment_id).name for r in runs.values()}
    assert experiments == {"tiny"} and {r.data.tags["testbed.group"] for r in runs.values()} == {"tiny"}
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("tensorboard:", "mlflow:"))]
    assert said == ["tensorboard: logging 2 runs; watch: tensorboard --logdir runs/tiny",
                    "mlflow: logging 2 runs; watch: mlflow ui --backend-store-uri sqlite:///store/mlflow.db",
                    "tensorboard: logged 2 runs; open: tensorboard --logdir runs/tiny",
                    "mlflow: logged 2 runs; open: mlflow ui --backend-store-uri sqlite:///store/mlflow.db"]
    assert len(list((tmp_path / "runs" / "tiny").glob("*/0/tensorboard/events.*"))) == 2


@pytest.mark.parametrize("quiet, said", [
    (False, ["tensorboard: logging 2 runs; watch: tensorboard --logdir runs/tiny",
             "tensorboard: logged 2 runs; open: tensorboard --logdir runs/tiny"]),
    (True, []),
])
def test_several_seeds_are_said_together_unless_quiet(tiny, capsys, quiet, said):
    testbed.run(tiny, seeds=[0, 1], out="runs", quiet=quiet, plots=False, track="tensorboard")
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("tensorboard:")] == said


def test_a_resumed_run_goes_on_with_its_totals(tiny, tmp_path):
    tiny["checkpoint"] = {"every_rounds": 2}
    run_killed_after(tiny, tmp_path / "runs", 3)
    testbed.run(tiny, out=tmp_path / "runs", quiet=True, plots=False, resume=True,
                track=f"mlflow={tmp_path / 'store'}")
    rounds = pd.read_csv(tmp_path / "runs" / "tiny" / "0" / "rounds.csv")
    client, runs = mlflow_runs(tmp_path / "store" / "mlflow.db")
    history = client.get_metric_history(runs["tiny/0"].info.run_id, "bytes_up_total")
    assert [m.step for m in history] == [3, 4]   # resumed from the checkpoint at round 2
    assert [m.value for m in history] == list(rounds["bytes_up"].cumsum()[2:])


def test_a_tracker_that_cannot_start_stops_the_run_before_round_1(tiny, tmp_path, capsys):
    with socket.socket() as s:   # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    file = write_yaml(tmp_path / "tiny.yaml", tiny)
    assert main(["run", str(file), "--out", "runs", "--quiet", "--track", f"mlflow=http://127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"no MLflow server answers at 127.0.0.1:{port}" in err[0]
    folder = tmp_path / "runs" / "tiny" / "0"
    assert len(pd.read_csv(folder / "rounds.csv")) == 0
    assert json.loads((folder / "summary.json").read_text())["status"].startswith("failed: --track mlflow=")


def test_unknown_trackers_and_missing_libraries_are_refused_before_anything_runs(tiny, tmp_path, monkeypatch, capsys):
    file = write_yaml(tmp_path / "tiny.yaml", tiny)
    assert main(["run", str(file), "--out", "runs", "--track", "neptune"]) == 2
    assert "--track neptune: unknown tracker; use tensorboard, mlflow or wandb" in capsys.readouterr().err
    monkeypatch.setattr("testbed.trackers.installed", lambda library: library != "wandb")
    assert main(["sweep", str(file), "--grid", "seed=[0,1]", "--out", "runs", "--track", "wandb"]) == 2
    assert capsys.readouterr().err.strip() == ('error: --track wandb: wandb is not installed; '
                                               'pip install -e ".[wandb]"')
    assert not (tmp_path / "runs").exists()
