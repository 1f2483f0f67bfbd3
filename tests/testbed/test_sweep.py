"""`testbed sweep`: every combination runs once into its own folder, completed ones are skipped, the index
lists them; bad grids end in one line and exit code 2 before anything runs."""
import json

import pandas as pd
import pytest
import yaml
from helpers import tiny_blobs, tiny_scenario, write_yaml

import testbed.data
from testbed.cli import main

TIERS = [1, 0.5, 0.25, 0.125, 0.0625]
GRID = ["--grid", "algorithm=[fedavg,fedprox]", "--grid", "fleet.heterogeneity=[low,high]", "--grid", "seed=[0,1]"]


@pytest.fixture
def tiny_file(tmp_path, monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    raw = tiny_scenario({"name": "fedprox", "mu": 0.5})
    raw["fleet"]["groups"][0]["tiers"] = TIERS
    return write_yaml(tmp_path / "tiny.yaml", raw)


def _sweep(file, out, *extra):
    return main(["sweep", str(file), *GRID, "--out", str(out), "--quiet", *extra])


def test_every_combination_runs_once_into_its_own_folder(tiny_file, tmp_path, capsys):
    out = tmp_path / "runs"
    assert _sweep(tiny_file, out) == 0
    index = pd.read_csv(out / "tiny" / "sweep.csv")
    assert list(index.columns) == ["algorithm.name", "fleet.heterogeneity", "seed", "folder", "status"]
    assert len(index) == 8 and (index["status"] == "completed").all()
    expected = {str(out / "tiny" / f"tiny-{a}-{h}" / str(s))
                for a in ("fedavg", "fedprox") for h in ("low", "high") for s in (0, 1)}
    assert set(index["folder"]) == expected
    for row in index.to_dict("records"):
        resolved = yaml.safe_load((tmp_path / row["folder"] / "scenario.resolved.yaml").read_text())
        algorithm = row["algorithm.name"]
        assert resolved["fleet"]["heterogeneity"] == row["fleet.heterogeneity"] and resolved["seed"] == row["seed"]
        assert len(pd.read_csv(tmp_path / row["folder"] / "rounds.csv")) == 2
        # the file's own algorithm keeps its mu; another algorithm starts from its defaults (fedavg has no mu)
        assert resolved["algorithm"] == ({"name": "fedprox", "mu": 0.5} if algorithm == "fedprox" else {"name": "fedavg"})
    printed = " ".join(capsys.readouterr().out.split())   # a line over 100 columns (tmp_path's) goes on the next
    assert printed.count(": running into ") == 8 and f"index: {out / 'tiny' / 'sweep.csv'}" in printed


def test_a_second_sweep_skips_completed_runs_and_resumes_the_others(tiny_file, tmp_path, capsys):
    out = tmp_path / "runs"
    assert _sweep(tiny_file, out) == 0
    folders = pd.read_csv(out / "tiny" / "sweep.csv")["folder"]
    stamps = {f: (out / f / "rounds.csv").stat().st_mtime_ns for f in folders}
    tables = (out / folders[3] / "rounds.csv").read_bytes()
    interrupted = out / folders[3] / "summary.json"
    summary = json.loads(interrupted.read_text())
    interrupted.write_text(json.dumps({**summary, "status": "interrupted"}))
    capsys.readouterr()

    assert _sweep(tiny_file, out) == 0
    printed = " ".join(capsys.readouterr().out.split())   # lines wrapped at 100 columns, joined
    assert printed.count("completed before, skipped") == 7 and printed.count(": resuming (interrupted) in ") == 1
    assert f": resuming (interrupted) in {folders[3]}" in printed and ": running into" not in printed
    unchanged = [f for f in folders if (out / f / "rounds.csv").stat().st_mtime_ns == stamps[f]]
    assert set(folders) - set(unchanged) <= {folders[3]}  # skipped runs are not touched
    assert (out / folders[3] / "rounds.csv").read_bytes() == tables  # resumed from its last checkpoint
    assert (pd.read_csv(out / "tiny" / "sweep.csv")["status"] == "completed").all()


def test_a_crashed_sweep_goes_on_from_the_checkpoint_to_the_tables_of_an_unbroken_one(tiny_file, tmp_path,
                                                                                      monkeypatch):
    from testbed.algorithms.fedavg import FedAvg

    grid = ["--grid", "seed=[0,1]", "--set", "stop.max_rounds=4", "--set", "checkpoint.every_rounds=2"]
    assert main(["sweep", str(tiny_file), *grid, "--out", str(tmp_path / "unbroken"), "--quiet"]) == 0
    calls, aggregate = {"n": 0}, FedAvg.aggregate

    def crash_in_round_seven(self, *args):  # seed 1's third round: its checkpoint is after round 2
        calls["n"] += 1
        if calls["n"] == 7:
            raise RuntimeError("power cut")
        return aggregate(self, *args)

    monkeypatch.setattr(FedAvg, "aggregate", crash_in_round_seven)
    assert main(["sweep", str(tiny_file), *grid, "--out", str(tmp_path / "crashed"), "--quiet"]) == 1  # a bug
    index = pd.read_csv(tmp_path / "crashed/tiny/sweep.csv")
    assert index["status"].tolist() == ["completed", "crashed: RuntimeError: power cut"]
    monkeypatch.setattr(FedAvg, "aggregate", aggregate)
    assert main(["sweep", str(tiny_file), *grid, "--out", str(tmp_path / "crashed"), "--quiet"]) == 0
    for seed in ("0", "1"):
        for table in ("rounds.csv", "events.csv"):
            assert ((tmp_path / "crashed/tiny/tiny" / seed / table).read_bytes()
                    == (tmp_path / "unbroken/tiny/tiny" / seed / table).read_bytes())


def test_a_failing_combination_leaves_the_others_running_and_exits_2(tiny_file, tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["sweep", str(tiny_file), "--grid", "client.lr=[1.0e+30,0.01]", "--out", str(out), "--quiet"]) == 2
    index = pd.read_csv(out / "tiny" / "sweep.csv")
    assert index["status"].str.startswith("failed").tolist() == [True, False] and index["status"][1] == "completed"
    err = capsys.readouterr().err.splitlines()
    assert "diverged" in err[0] and err[-1].startswith(f"error: 1 of 2 runs did not complete ({index['folder'][0]})")


def test_a_completed_run_of_an_edited_scenario_is_neither_skipped_nor_overwritten(tiny_file, tmp_path, capsys):
    out = tmp_path / "runs"
    grid = ["--grid", "seed=[0]"]
    assert main(["sweep", str(tiny_file), *grid, "--out", str(out), "--quiet"]) == 0
    before = (out / "tiny/tiny/0/rounds.csv").read_bytes()
    capsys.readouterr()
    assert main(["sweep", str(tiny_file), *grid, "--out", str(out), "--quiet", "--set", "client.lr=0.02"]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {out / 'tiny/tiny/0'}: holds a completed run of another scenario (client.lr: 0.01 "
                   "there, 0.02 now); move it away or sweep into another --out\n")
    assert (out / "tiny/tiny/0/rounds.csv").read_bytes() == before


BAD_GRIDS = {
    "no equals sign": (["--grid", "seed"], "--grid seed: expected KEY=[VALUE,...], e.g. --grid seed=[0,1,2]"),
    "not YAML": (["--grid", "seed=[0,1"], "--grid seed=[0,1: [0,1 is not a YAML list; write e.g. [0.1, 0.01]"),
    "empty list": (["--grid", "seed=[]"], "--grid seed=[]: no values; list at least one"),
    "twice": (["--grid", "algorithm=[fedavg]", "--grid", "algorithm.name=[fedprox]"],
              "--grid algorithm.name=[fedprox]: algorithm.name is already on the grid; give all its values in one"),
    "repeated value": (["--grid", "seed=[1,1]"], "--grid seed=[1,1]: a value is listed twice; list each once"),
    "unknown field": (["--grid", "client.lrr=[0.1]"], "{file} (client.lrr=0.1): client.lrr: unknown key; remove it"),
    "bad value": (["--grid", "fleet.heterogeneity=[low,extreme]"],
                  "{file} (fleet.heterogeneity=extreme): fleet.heterogeneity: Input should be 'low', 'medium' or"),
    "unknown algorithm": (["--grid", "algorithm=[fedavg,fedfoo]"],
                          "{file} (algorithm.name=fedfoo): algorithm.name: unknown 'fedfoo'; choose one of"),
    "not a section": (["--grid", "seed.x=[1]"], "--grid seed.x=1: the value before 'x' is not a section"),
}


@pytest.mark.parametrize("case", sorted(BAD_GRIDS))
def test_bad_grids_give_one_line_and_exit_2_before_running(case, tiny_file, tmp_path, capsys):
    grid, expected = BAD_GRIDS[case]
    assert main(["sweep", str(tiny_file), *grid, "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {expected.format(file=tiny_file)}"), err
    assert not (tmp_path / "runs").exists()
