import subprocess
import sys
from pathlib import Path

import pytest

from analysis.metrics import summarize
from analysis.runs import load_run, run_labels, scenario_groups


def test_load_run_reads_the_folder(run_dir):
    run = load_run(run_dir)
    assert (run.name, run.seed, run.algorithm, run.label) == ("tiny", 0, "fedavg", "tiny/0")
    assert run.target_accuracy == 0.8
    assert len(run.rounds) == 5 and len(run.events) == 26
    # No summary.json in the folder: rebuilt from rounds.csv with the scenario's target.
    assert run.summary == summarize(run.rounds, [0.8])


def test_load_run_prefers_the_written_summary(run_dir):
    (run_dir / "summary.json").write_text('{"final_accuracy": 0.5}')
    assert load_run(run_dir).summary == {"final_accuracy": 0.5}


def test_a_missing_folder_is_named_in_a_one_line_error(tmp_path):
    missing = tmp_path / "runs" / "x" / "0"
    with pytest.raises(FileNotFoundError) as error:
        load_run(missing)
    message = str(error.value)
    assert str(missing) in message and "run folder" in message and "\n" not in message


def test_a_missing_file_is_named(run_dir):
    (run_dir / "rounds.csv").unlink()
    with pytest.raises(FileNotFoundError, match="no rounds.csv here; is this a run folder written by 'testbed run'"):
        load_run(run_dir)


def test_a_scenario_folder_points_to_its_seeds(run_dir, make_run):
    make_run(run_dir.parent / "1", seed=1)
    with pytest.raises(FileNotFoundError, match="pass one of its seed folders: 0, 1"):
        load_run(run_dir.parent)


def test_labels_add_the_algorithm_only_where_runs_collide(tmp_path, make_run):
    fedavg = load_run(make_run(tmp_path / "a" / "tiny" / "0", algorithm="fedavg"))
    fedprox = load_run(make_run(tmp_path / "b" / "tiny" / "0", algorithm="fedprox"))
    other_seed = load_run(make_run(tmp_path / "a" / "tiny" / "1", seed=1))
    assert run_labels([fedavg, fedprox, other_seed]) == ["tiny/fedavg/0", "tiny/fedprox/0", "tiny/1"]


def test_analysis_never_imports_the_simulator():
    root = Path(__file__).resolve().parents[2]
    code = ("import sys, analysis; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'simpy', 'testbed')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_scenario_groups_keep_order_and_split_algorithms_of_one_name(tmp_path, make_run):
    fedavg = [load_run(make_run(tmp_path / "a" / "tiny" / str(seed), seed=seed)) for seed in (0, 1)]
    fedprox = load_run(make_run(tmp_path / "b" / "tiny" / "0", algorithm="fedprox"))
    other = load_run(make_run(tmp_path / "a" / "other" / "0", name="other"))
    groups = scenario_groups([other, fedavg[0], fedprox, fedavg[1]])
    assert list(groups) == ["other", "tiny/fedavg", "tiny/fedprox"]
    assert [run.path for run in groups["tiny/fedavg"]] == [run.path for run in fedavg]
    assert [run.path for run in groups["tiny/fedprox"]] == [fedprox.path]
