"""--track wandb, offline, read back from the run's own record (run-<id>.wandb, read by the product's reader,
testbed/trackers/wandb_offline.py): the history at step = round with sim_time_s as every metric's x-axis, the config,
the summary, the files, the group and project, the exit codes of a failed and an interrupted run, where W&B's folder
goes and the lines that say so; the reader's refusals."""
import dataclasses
import os

import pytest
from tracker_cases import EXPECTED, NEVER, PARAMS, ROWS, SUMMARY, play, tracked_run

from testbed.errors import TestbedError
from testbed.trackers import Trackers
from testbed.trackers.wandb_offline import read_offline_run

pytest.importorskip("wandb")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three offline runs (W&B starts each in about a second): a sweep's run to the end in project "proj"; a failed
    run with neither project nor WANDB_DIR; an interrupted one with WANDB_DIR set. Returns name -> OfflineRun,
    and the folders. W&B's core writes behind a buffer: each read waits for the run's exit record."""
    out = tmp_path_factory.mktemp("wandb") / "runs"
    got, folders = {}, {"lines": []}
    with pytest.MonkeyPatch.context() as mp:
        for name in ("WANDB_MODE", "WANDB_DIR", "WANDB_PROJECT", "WANDB_SILENT"):
            mp.delenv(name, raising=False)
        run = tracked_run(out, group="sweep", name="sweep-fedavg/0")
        play(Trackers(["wandb=proj"], run), run, say=folders["lines"].append)
        got["sweep"], folders["sweep"] = read_offline_run(run.folder, wait_s=20), run.folder
        run = dataclasses.replace(tracked_run(out, name="failed/0"), scenario="failed")
        play(Trackers(["wandb"], run), run, end="failed: the data is gone")
        got["failed"], folders["failed"] = read_offline_run(run.folder, wait_s=20), run.folder
        mp.setenv("WANDB_DIR", str(out / "elsewhere"))
        run = dataclasses.replace(tracked_run(out, name="interrupted/0"), scenario="interrupted")
        trackers = Trackers(["wandb"], run)
        trackers.start()
        trackers.log(ROWS[0])
        trackers.close("interrupted")
        got["interrupted"], folders["interrupted"] = read_offline_run(out / "elsewhere", wait_s=20), run.folder
    return got, folders


def test_each_metric_at_its_round_nans_left_out(runs):
    history = runs[0]["sweep"].history
    assert list(history["_step"]) == [1, 2, 3] and list(history.columns[:2]) == ["_step", "sim_time_s"]
    for key, expected in EXPECTED.items():
        logged = history[["_step", key]].dropna()
        assert list(zip(logged["_step"], logged[key])) == expected, key
    assert not NEVER & set(history.columns)


def test_sim_time_is_every_metrics_x_axis(runs):
    assert runs[0]["sweep"].defined == {"sim_time_s": "", "*": "sim_time_s"}


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
    assert (got["sweep"].project, got["sweep"].group, got["sweep"].name) == ("proj", "sweep", "sweep-fedavg/0")
    assert (got["failed"].project, got["failed"].group, got["failed"].name) == ("fl-edge-testbed", "", "failed/0")


def test_a_failed_run_exits_1_an_interrupted_one_255(runs):
    got, folders = runs
    assert (got["failed"].exit_code, got["failed"].summary["status"]) == (1, "failed: the data is gone")
    assert (got["interrupted"].exit_code, got["interrupted"].summary["status"]) == (255, "interrupted")
    assert list(got["interrupted"].history["sim_time_s"]) == [1.5]
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


def test_the_lines_name_the_offline_runs_folder_and_wandb_sync(runs):
    got, folders = runs
    folder = got["sweep"].file.parent   # outside the current folder: shown whole
    assert folder.parent == folders["sweep"] / "wandb" and folder.name.startswith("offline-run-")
    assert folders["lines"] == [f"wandb: logging this run offline into {folder}",
                                f"wandb: kept offline; upload: wandb sync {folder}"]


def test_the_reader_takes_the_run_folder_its_wandb_folder_or_the_file(runs):
    got, folders = runs
    file = got["sweep"].file
    assert {read_offline_run(p).file for p in (folders["sweep"], folders["sweep"] / "wandb", file.parent, file)} == {
        file}
    assert "3 history rows, exit code 0" in repr(got["sweep"])


def test_a_run_still_writing_is_read_as_far_as_it_got(runs, tmp_path):
    whole = runs[0]["sweep"]
    data = whole.file.read_bytes()
    (tmp_path / "run-cut.wandb").write_bytes(data[:-10])   # the exit record, the last, cut short
    cut = read_offline_run(tmp_path / "run-cut.wandb")
    assert cut.exit_code is None and cut.name == "sweep-fedavg/0"
    assert cut.history.equals(whole.history)


def test_the_reader_refuses_in_one_line(runs, tmp_path):
    import shutil

    run = runs[0]["sweep"].file.parent
    two = tmp_path / "two"   # a run folder whose W&B folder holds two runs (a resumed run's)
    shutil.copytree(run, two / "wandb" / "offline-run-20260101_000000-copy")
    shutil.copytree(run, two / "wandb" / run.name)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "run-x.wandb").write_bytes(b"not W&B")
    for path, words in ((two, "holds 2 W&B runs; name one: "), (two / "wandb" / run.name, ""),
                        (tmp_path / "other" / "x", "no W&B run here"),
                        (tmp_path / "other", f"{tmp_path / 'other' / 'run-x.wandb'}: not a W&B run file")):
        if not words:  # one of them, named
            assert read_offline_run(path).name == "sweep-fedavg/0"
            continue
        with pytest.raises(TestbedError) as err:
            read_offline_run(path)
        assert words in str(err.value) and "\n" not in str(err.value)
