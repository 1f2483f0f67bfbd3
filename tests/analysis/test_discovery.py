"""Which runs report and compare cover: every run folder a folder holds, a sweep's and lone runs alike, at any
depth, with a line for each one left out and why (issue 27: a sweep's folder holding a lone run listed only the
sweep's). Run folders are conftest's tiny runs; the study's sit in root/runs/tiny-<algorithm>-<level>/<seed>."""
import pandas as pd
import pytest

from analysis.discovery import find_runs
from testbed.cli import main


def sweep_index(folder, rows):
    """A sweep.csv as testbed sweep writes it, its folders as given (relative to where the sweep ran)."""
    pd.DataFrame([{"algorithm.name": algorithm, "folder": run, "status": status} for algorithm, run, status in rows]
                 ).to_csv(folder / "sweep.csv", index=False)


@pytest.fixture
def sweep_and_lone_run(make_study, make_run, tmp_path):
    """The study as a sweep's runs (its index lists two of them and a combination not started, as written from
    another working directory) beside a lone run, root/runs/tiny/0."""
    runs = tmp_path / "runs"
    make_study(tmp_path)
    sweep_index(runs, [("fedlps", "out/runs/tiny-fedlps-low/0", "completed"),
                       ("fedavg", "out/runs/tiny-fedavg-low/0", "completed"),
                       ("fedsgd", "out/runs/tiny-fedsgd-low/0", "not started")])
    make_run(runs / "tiny" / "0")
    return runs


def test_a_folder_holding_a_sweep_and_a_lone_run_covers_both(sweep_and_lone_run):
    runs = sweep_and_lone_run
    found = find_runs([runs])
    # the index's runs in its order, then the others in path order: tiny/ sorts before tiny-fedavg-high/
    assert found.folders == [runs / "tiny-fedlps-low/0", runs / "tiny-fedavg-low/0", runs / "tiny/0",
                             runs / "tiny-fedavg-high/0", runs / "tiny-fedavg-low/1", runs / "tiny-fedlps-high/0"]
    assert found.skipped == [f"skipped {runs / 'tiny-fedsgd-low/0'}: this sweep's combination has not started "
                             "(sweep.csv: not started)"]


def test_report_and_compare_print_what_they_skipped_and_cover_the_rest(sweep_and_lone_run, tmp_path, capsys,
                                                                     unrendered):
    runs = sweep_and_lone_run
    assert main(["report", str(runs), "--out", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr().out
    # the line wraps at 100 columns where the path is long (pytest's under xdist): read it unwrapped
    assert " ".join(printed.split()).startswith(f"skipped {runs / 'tiny-fedsgd-low/0'}: ")
    assert pd.read_csv(tmp_path / "report" / "tta.csv")["run"].tolist() == [
        "tiny-fedlps-low/0", "tiny-fedavg-low/0", "tiny/0", "tiny-fedavg-high/0", "tiny-fedavg-low/1",
        "tiny-fedlps-high/0"]
    page = (tmp_path / "report" / "report.md").read_text().splitlines()
    assert page[0] == "# Report: 6 runs of tiny-fedlps-low, tiny-fedavg-low, tiny, tiny-fedavg-high, tiny-fedlps-high"
    assert page[2].startswith(f"- skipped {runs / 'tiny-fedsgd-low/0'}: ")
    assert "tiny-fedsgd-low/0: this sweep" in (tmp_path / "report" / "report.html").read_text()

    assert main(["compare", str(runs)]) == 0   # its default output: beside the runs it found
    assert " ".join(capsys.readouterr().out.split()).startswith(f"skipped {runs / 'tiny-fedsgd-low/0'}: ")
    # tiny/0 differs from the study's runs in having no fleet section: a group of its own
    assert pd.read_csv(runs / "compare" / "compare.csv")["seeds"].tolist() == [1, 2, 1, 1, 1]


def test_a_report_over_a_folder_reads_each_run_once(sweep_and_lone_run, tmp_path, monkeypatch, unrendered):
    """Discovery reads each run under a folder (a damaged one is skipped, not reported); the report and compare
    then use those runs instead of reading every folder again: each rounds.csv is read once a command."""
    import analysis.runs
    reads, table_of = [], analysis.runs.table_of

    def counted(path, *args, **kwargs):
        reads.append(path) if path.name == "rounds.csv" else None
        return table_of(path, *args, **kwargs)

    monkeypatch.setattr(analysis.runs, "table_of", counted)
    assert main(["report", str(sweep_and_lone_run), "--out", str(tmp_path / "report")]) == 0
    assert len(reads) == len(set(reads)) == 6
    assert main(["compare", str(sweep_and_lone_run), "--out", str(tmp_path / "compare")]) == 0
    assert len(reads) == 12 and len(set(reads)) == 6


def test_damaged_and_unstarted_run_folders_are_named_and_the_others_reported(make_run, tmp_path, rounds_csv):
    root = tmp_path / "mine"
    good = make_run(root / "a" / "quickstart" / "0")
    deep = make_run(root / "b" / "lr-0.1" / "quickstart" / "7", seed=7)
    (good / "plots").mkdir()                           # a run's own folders hold no runs
    (root / "report").mkdir()                          # nor do folders a report wrote
    (root / "report" / "tta.csv").write_text("run\n")
    torn = make_run(root / "c" / "0", rounds=rounds_csv[:-3])
    starting = root / "d" / "0"
    starting.mkdir(parents=True)
    (starting / "scenario.resolved.yaml").write_text("name: d\n")
    no_events = make_run(root / "e" / "0")
    (no_events / "events.csv").unlink()
    found = find_runs([root])
    assert found.folders == [good, deep]
    assert found.skipped == [
        f"skipped {torn / 'rounds.csv'}: its last row is torn (the run stopped while writing it); testbed run "
        "--resume cuts it, or run it again",
        f"skipped {starting}: no rounds.csv: its run has not started (or stopped before writing its tables)",
        f"skipped {no_events}: no events.csv here; is this a run folder written by 'testbed run'?"]


def test_a_run_folder_named_is_read_as_one_and_its_damage_is_an_error(make_run, tmp_path, rounds_csv, capsys):
    torn = make_run(tmp_path / "runs" / "tiny" / "0", rounds=rounds_csv[:-3])
    assert find_runs([torn]).folders == [torn]   # as named: load_run will say what is wrong with it
    assert main(["report", str(torn), "--out", str(tmp_path / "out")]) == 2
    assert "rounds.csv: its last row is torn" in capsys.readouterr().err


def test_a_folder_without_runs_is_one_line_naming_it_and_what_it_skipped(tmp_path, capsys):
    empty = tmp_path / "nothing"
    (empty / "plots").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=f"^{empty}: no run folder here"):
        find_runs([empty])
    sweep_index(empty, [("fedavg", "runs/s/s-fedavg/0", "not started")])
    assert main(["report", str(empty)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{empty}: no run folder here" in err and "has not started" in err


def test_an_unreadable_sweep_index_is_named_and_its_runs_still_found(make_run, tmp_path):
    runs = tmp_path / "runs"
    second, first = make_run(runs / "s-b" / "0"), make_run(runs / "s-a" / "0")
    (runs / "sweep.csv").write_text("")   # cut to nothing
    found = find_runs([runs])
    assert found.folders == [first, second]
    assert found.skipped == [f"skipped {runs / 'sweep.csv'}: unreadable as a sweep's index (a 'folder' column); "
                             "the runs beside it are reported without its order"]


def test_the_copies_of_runs_that_trackers_keep_are_not_runs(make_run, tmp_path):
    """MLflow's artifacts (<store>/mlartifacts/<experiment>/<run id>/artifacts, or mlruns/...) and W&B's files
    (wandb/offline-run-<time>-<id>/files, where WANDB_DIR puts them under runs/) hold a run folder's tables: left
    out silently (--track, testbed/trackers/)."""
    runs = tmp_path / "runs"
    make_run(runs / "tiny" / "0")
    make_run(runs / "mlartifacts" / "tiny" / ("0123456789abcdef" * 2) / "artifacts")
    make_run(runs / "mlruns" / "1" / ("fedcba9876543210" * 2) / "artifacts")
    make_run(runs / "wandb" / "offline-run-20261129_102400-45il9dy6" / "files")
    make_run(runs / "artifacts")   # a run folder of that name, not under a run id: a run
    found = find_runs([runs])
    assert found.folders == [runs / "artifacts", runs / "tiny" / "0"] and found.skipped == []
