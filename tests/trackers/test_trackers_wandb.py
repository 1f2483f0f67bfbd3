"""--track wandb, offline, read back from the run's own record (run-<id>.wandb, read by wandb_records.py): the
history at step = round with sim_time_s as every metric's x-axis, the config, the summary, the files, the group and
project, the exit codes of a failed and an interrupted run, where W&B's folder goes."""
import dataclasses
import os

import pytest
from tracker_cases import EXPECTED, NEVER, PARAMS, ROWS, SUMMARY, play, tracked_run
from wandb_records import offline_run

from testbed.trackers import Trackers

pytest.importorskip("wandb")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three offline runs (W&B starts each in about a second): a sweep's run to the end in project "proj"; a failed
    run with neither project nor WANDB_DIR; an interrupted one with WANDB_DIR set. Returns name -> OfflineRun,
    and the folders."""
    out = tmp_path_factory.mktemp("wandb") / "runs"
    got, folders = {}, {}
    with pytest.MonkeyPatch.context() as mp:
        for name in ("WANDB_MODE", "WANDB_DIR", "WANDB_PROJECT", "WANDB_SILENT"):
            mp.delenv(name, raising=False)
        run = tracked_run(out, group="sweep", name="sweep-fedavg/0")
        play(Trackers(["wandb=proj"], run), run)
        got["sweep"], folders["sweep"] = offline_run(run.folder), run.folder
        run = dataclasses.replace(tracked_run(out, name="failed/0"), scenario="failed")
        play(Trackers(["wandb"], run), run, end="failed: the data is gone")
        got["failed"], folders["failed"] = offline_run(run.folder), run.folder
        mp.setenv("WANDB_DIR", str(out / "elsewhere"))
        run = dataclasses.replace(tracked_run(out, name="interrupted/0"), scenario="interrupted")
        trackers = Trackers(["wandb"], run)
        trackers.start()
        trackers.log(ROWS[0])
        trackers.close("interrupted")
        got["interrupted"], folders["interrupted"] = offline_run(out / "elsewhere"), run.folder
    return got, folders


def test_each_metric_at_its_round_nans_left_out(runs):
    history = runs[0]["sweep"].history
    assert [h["_step"] for h in history] == [1, 2, 3]
    for key, expected in EXPECTED.items():
        assert [(h["_step"], h[key]) for h in history if key in h] == expected, key
    assert not NEVER & {k for h in history for k in h}


def test_sim_time_is_every_metrics_x_axis(runs):
    metrics = [(m.name, m.glob_name, m.step_metric) for m in runs[0]["sweep"].metrics]
    assert metrics == [("sim_time_s", "", ""), ("", "*", "sim_time_s")]


def test_the_scenario_is_the_config_and_the_summary_the_runs(runs):
    run = runs[0]["sweep"]
    assert {k: v for k, v in run.config.items() if k != "_wandb"} == PARAMS
    assert {k: run.summary[k] for k in SUMMARY} == SUMMARY
    assert run.exit_code == 0


def test_the_files_are_saved_at_their_paths_under_the_run_folder(runs):
    run, folder = runs[0]["sweep"], runs[1]["sweep"]
    assert {"plots/a.png", "rounds.csv"} <= set(run.files)
    kept = next(folder.glob("wandb/offline-run-*/files/plots/a.png"))
    assert kept.read_bytes() == (folder / "plots" / "a.png").read_bytes()
    assert os.path.samefile(kept, folder / "plots" / "a.png")  # hard-linked, not copied, on one file system


def test_group_project_and_name(runs):
    got = runs[0]
    assert (got["sweep"].run.project, got["sweep"].run.run_group, got["sweep"].run.display_name) == (
        "proj", "sweep", "sweep-fedavg/0")
    assert (got["failed"].run.project, got["failed"].run.run_group, got["failed"].run.display_name) == (
        "fl-edge-testbed", "", "failed/0")


def test_a_failed_run_exits_1_an_interrupted_one_255(runs):
    got, folders = runs
    assert (got["failed"].exit_code, got["failed"].summary["status"]) == (1, "failed: the data is gone")
    assert (got["interrupted"].exit_code, got["interrupted"].summary["status"]) == (255, "interrupted")
    assert [h["sim_time_s"] for h in got["interrupted"].history] == [1.5]
    assert not (folders["interrupted"] / "wandb").exists()  # WANDB_DIR took W&B's folder elsewhere


def test_a_start_that_fails_says_why_in_one_line(tmp_path, monkeypatch):
    from testbed.errors import TestbedError

    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "file" / "wandb"))
    with pytest.raises(TestbedError) as err:
        Trackers(["wandb"], tracked_run(tmp_path)).start()
    assert str(err.value) == (f"--track wandb: could not start (NotADirectoryError: [Errno 20] Not a directory: "
                              f"'{tmp_path / 'file' / 'wandb'}'); check the project and WANDB_* settings "
                              f"(WANDB_MODE=offline works without network or account)")
