"""The lines that say where a tracker keeps a run or a sweep's runs (testbed/trackers/places.py and each backend's
place), made from the settings alone: no tracker library is needed. The lines of real runs: test_track_runs.py."""
import pytest
from tracker_cases import tracked_run

from testbed.trackers import TrackedGroup, say_group
from testbed.trackers.mlflow import MlflowTracker
from testbed.trackers.places import argument, shown, uri_argument
from testbed.trackers.tensorboard import TensorBoardTracker


@pytest.fixture
def here(tmp_path, monkeypatch, clean_env):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_paths_under_the_current_folder_are_relative_others_whole_and_quoted_where_they_must(here):
    assert shown(here / "runs" / "a") == shown("runs/a") == "runs/a"
    assert shown("/elsewhere/x") == "/elsewhere/x"
    assert argument(here / "my runs", "*/wandb") == "'my runs'/*/wandb"
    assert uri_argument(f"sqlite:///{here}/runs/mlflow.db") == "sqlite:///runs/mlflow.db"
    assert uri_argument("http://host:5000") == "http://host:5000"


def group(here, count=3) -> TrackedGroup:
    return TrackedGroup(here / "runs" / "study", "*/*", count, here / "runs", "study")


@pytest.mark.parametrize("specs, env, lines", [
    (["tensorboard", "mlflow"], {}, [
        "tensorboard: logging 3 runs; watch: tensorboard --logdir runs/study",
        "mlflow: logging 3 runs; watch: mlflow ui --backend-store-uri sqlite:///runs/mlflow.db"]),
    (["tensorboard=tb", "mlflow=http://host:5000"], {}, [
        "tensorboard: logging 3 runs; watch: tensorboard --logdir tb",
        "mlflow: logging 3 runs; watch: http://host:5000"]),
    (["wandb"], {}, ["wandb: logging 3 runs offline into runs/study/*/*/wandb"]),
    (["wandb"], {"WANDB_DIR": "/scratch"}, ["wandb: logging 3 runs offline into /scratch/wandb"]),
    (["wandb=proj"], {"WANDB_MODE": "online"}, ["wandb: logging 3 runs to project proj, group study"]),
    (["wandb"], {"WANDB_MODE": "disabled"}, ["wandb: WANDB_MODE=disabled: nothing kept"]),
])
def test_a_sweeps_start_lines(here, monkeypatch, capsys, specs, env, lines):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    say_group(specs, group(here), "start")
    assert capsys.readouterr().out.splitlines() == lines


def test_a_sweeps_end_lines_and_none_where_quiet_or_nothing_runs(here, capsys):
    say_group(["wandb", "mlflow"], group(here), "end")
    assert capsys.readouterr().out.splitlines() == [
        "wandb: kept offline; upload: wandb sync runs/study/*/*/wandb/offline-run-*",
        "mlflow: logged 3 runs; open: mlflow ui --backend-store-uri sqlite:///runs/mlflow.db"]
    say_group(["wandb"], group(here), "end", quiet=True)
    say_group(["wandb"], group(here, count=0), "start")
    assert capsys.readouterr().out == ""


def test_a_runs_lines_tensorboard_logdir_and_an_mlflow_servers_run_page(here):
    run = tracked_run(here / "runs")
    assert TensorBoardTracker("tensorboard=tb", "tb", run).place().line("end") == (
        "tensorboard: logged this run; open: tensorboard --logdir tb")
    tracker = MlflowTracker("mlflow=http://host:5000/", "http://host:5000/", run)
    tracker.uri, tracker.experiment_id, tracker.run_id = "http://host:5000/", "7", "abc"
    assert tracker.place().line("start") == (
        "mlflow: logging run quickstart/0; watch: http://host:5000/#/experiments/7/runs/abc")
