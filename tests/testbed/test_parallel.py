"""Runs in parallel (`sweep --jobs`, `run --seeds --jobs`): the same tables as serial, and a failing run does
not stop the others."""
import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from helpers import TWO_DEVICES, write_yaml

from testbed.cli import main
from testbed.execution.threads import DEFAULT_THREADS, torch_threads

# real registered data (worker processes are spawned: a test's monkeypatched registry does not reach them)
SCENARIO = {**TWO_DEVICES, "name": "par", "data": {"name": "synthetic", "options": {"num_clients": 4, "dim": 5},
                                                   "partition": {"kind": "iid"}},
            "model": {"name": "logreg"}, "client": {"lr": 0.05, "batch_size": 10, "local_steps": 3},
            "stop": {"max_rounds": 3}}
GRID = ["--grid", "client.lr=[0.05,0.1]", "--grid", "seed=[0,1]"]


@pytest.fixture
def scenario_file(tmp_path):
    return write_yaml(tmp_path / "par.yaml", SCENARIO)


def _tables(index_file):
    index = pd.read_csv(index_file)
    return {(row["client.lr"], row["seed"]): tuple((Path(row["folder"]) / t).read_bytes()
                                                   for t in ("rounds.csv", "events.csv"))
            for row in index.to_dict("records")}, index


@pytest.mark.slow
def test_a_sweep_with_two_jobs_gives_the_serial_tables(scenario_file, tmp_path, capsys):
    assert main(["sweep", str(scenario_file), *GRID, "--out", str(tmp_path / "serial"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["sweep", str(scenario_file), *GRID, "--out", str(tmp_path / "parallel"), "--quiet",
                 "--jobs", "2"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("done]") == 4 and "[4/4 done]" in printed
    serial, _ = _tables(tmp_path / "serial" / "par" / "sweep.csv")
    parallel, index = _tables(tmp_path / "parallel" / "par" / "sweep.csv")
    assert (index["status"] == "completed").all() and len(parallel) == 4
    assert parallel == serial


@pytest.mark.slow
def test_a_failing_combination_is_indexed_while_the_others_complete(scenario_file, tmp_path, capsys):
    # lr 1e300 makes the logistic regression diverge in round 1: a TestbedError inside the run
    grid = ["--grid", "client.lr=[0.05,1e300]", "--grid", "seed=[0,1]"]
    assert main(["sweep", str(scenario_file), *grid, "--out", str(tmp_path), "--quiet", "--jobs", "2"]) == 2
    err = capsys.readouterr().err
    assert "diverged" in err and err.strip().splitlines()[-1].startswith("error: 2 of 4 runs did not complete")
    index = pd.read_csv(tmp_path / "par" / "sweep.csv")
    done = index[index["client.lr"] == 0.05]
    assert (done["status"] == "completed").all()
    assert index[index["client.lr"] != 0.05]["status"].str.startswith("failed: round 1: the model diverged").all()


@pytest.mark.slow
def test_run_seeds_in_parallel_equals_one_run_per_seed(scenario_file, tmp_path, capsys):
    for seed in (0, 1):
        assert main(["run", str(scenario_file), "--seed", str(seed), "--out", str(tmp_path / "one"), "--quiet"]) == 0
    assert main(["run", str(scenario_file), "--seeds", "0,1", "--jobs", "2", "--out", str(tmp_path / "many")]) == 0
    assert "[2/2 done] seed" in capsys.readouterr().out
    for seed in ("0", "1"):
        for table in ("rounds.csv", "events.csv"):
            assert ((tmp_path / "one/par" / seed / table).read_bytes()
                    == (tmp_path / "many/par" / seed / table).read_bytes())
    assert (tmp_path / "many/par/plots/tta.csv").is_file()


@pytest.mark.parametrize("argv, message", [
    (["--jobs", "2"], "--jobs and --ray run several seeds at once: add --seeds"),
    (["--seeds", "0,1", "--seed", "3"], "--seed and --seeds: give one of them"),
])
def test_parallel_flags_misused(scenario_file, tmp_path, capsys, argv, message):
    assert main(["run", str(scenario_file), "--out", str(tmp_path), "--quiet", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1


@pytest.mark.slow   # starting Ray takes most of a minute on 2 cores
def test_a_sweep_on_ray_gives_the_serial_tables(scenario_file, tmp_path, capsys):
    pytest.importorskip("ray")
    grid = ["--grid", "seed=[0,1]"]
    assert main(["sweep", str(scenario_file), *grid, "--out", str(tmp_path / "serial"), "--quiet"]) == 0
    assert main(["sweep", str(scenario_file), *grid, "--out", str(tmp_path / "ray"), "--quiet", "--ray", "local"]) == 0
    assert "[2/2 done]" in capsys.readouterr().out
    for seed in ("0", "1"):
        for table in ("rounds.csv", "events.csv"):
            serial, ray = (tmp_path / where / "par/par" / seed / table for where in ("serial", "ray"))
            assert serial.read_bytes() == ray.read_bytes()


@pytest.mark.parametrize("argv, message", [
    (["run", "x.yaml", "--jobs", "0"], "error: testbed run: argument --jobs: '0' is not a number of jobs"),
    (["run", "x.yaml", "--seeds", "0,x"], "error: testbed run: argument --seeds: '0,x' is not a list of seeds"),
    (["run", "x.yaml", "--seeds", "1,1"], "error: testbed run: argument --seeds: '1,1' lists a seed twice"),
    (["sweep", "x.yaml", "--grid", "seed=[0]", "--jobs", "-1"], "error: testbed sweep: argument --jobs: '-1' is"),
])
def test_bad_parallel_flag_values_give_one_line_and_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith(message), err


# A CNN at batch 10 rounds differently on 1 and 2 torch threads (its matrix products and convolution gradients
# split their sums between threads): what executor.threads is for.
CNN = {**TWO_DEVICES, "name": "cnn", "client": {"lr": 0.05, "batch_size": 10, "local_steps": 4},
       "stop": {"max_rounds": 2}}


@pytest.mark.parametrize("threads", [[], pytest.param(["--set", "executor.threads=2"], marks=pytest.mark.slow)],
                         ids=["default", "pinned"])
def test_a_parallel_sweep_gives_the_serial_tables_for_a_cnn(tmp_path, capsys, threads):
    """Unset, every run trains on one thread wherever it runs (execution/threads.DEFAULT_THREADS); pinned, on its
    count, also in a worker of --jobs 2 on 2 cores."""
    path = write_yaml(tmp_path / "cnn.yaml", CNN)
    args = ["--grid", "seed=[0,1]", *threads, "--quiet"]
    assert main(["sweep", str(path), *args, "--out", str(tmp_path / "serial")]) == 0
    assert main(["sweep", str(path), *args, "--out", str(tmp_path / "parallel"), "--jobs", "2"]) == 0
    assert "note:" not in capsys.readouterr().err
    serial = pd.read_csv(tmp_path / "serial/cnn/sweep.csv")["folder"]
    parallel = pd.read_csv(tmp_path / "parallel/cnn/sweep.csv")["folder"]
    for one, other in zip(serial, parallel, strict=True):
        for table in ("rounds.csv", "events.csv"):
            assert (Path(one) / table).read_bytes() == (Path(other) / table).read_bytes()
        assert json.loads((Path(other) / "summary.json").read_text())["torch_threads"] == (2 if threads else 1)


def test_torch_threads_sets_the_count_for_the_block_only():
    before = torch.get_num_threads()
    with torch_threads(1) as inside:
        assert inside == torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with torch_threads(None) as inside:
        assert inside == torch.get_num_threads() == DEFAULT_THREADS == 1
    assert torch.get_num_threads() == before
