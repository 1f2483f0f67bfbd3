"""The Python API (testbed/api.py): a run from a file, a dict or a Scenario writes the command line's tables; a run
folder reads back as the same frames; bad input raises one-line TestbedErrors; `import testbed` stays light; and
reading a run folder (load_run, report, compare, in-process or through the command line) never imports the code
its scenario names."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import ROOT, tiny_blobs, tiny_scenario, write_yaml

import testbed
import testbed.data
from testbed.cli import main
from testbed.errors import TestbedError

TABLES = ("rounds.csv", "events.csv", "devices.csv")


@pytest.fixture
def tiny(monkeypatch) -> dict:
    """FedAvg on tiny_blobs, two devices, two rounds (helpers.tiny_scenario)."""
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    return tiny_scenario({"name": "fedavg"})


def _python(*args: str, cwd: Path = ROOT, path: tuple[Path, ...] = ()) -> subprocess.CompletedProcess:
    """A fresh interpreter importing this worktree's code first (the installed package may be another checkout's),
    then the folders in `path`."""
    python_path = os.pathsep.join(map(str, [ROOT, *path, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=dict(os.environ, PYTHONPATH=python_path),
                          capture_output=True, text=True)


def test_import_testbed_imports_neither_torch_nor_pandas():
    done = _python("-c", "import testbed, sys; print('torch' in sys.modules, 'pandas' in sys.modules)")
    assert done.returncode == 0 and done.stdout.split() == ["False", "False"], done.stderr


def test_the_api_names_are_the_api_functions_even_beside_a_submodule_named_alike():
    import testbed.sweeps  # noqa: F401 - a submodule import binds its name on the package; not `sweep`'s
    from testbed import api

    assert {"run", "load_run", "sweep", "compare", "report", "validate", "Run"} <= set(dir(testbed))
    assert testbed.run is api.run and testbed.sweep is api.sweep and testbed.load_run is api.load_run
    with pytest.raises(AttributeError, match="no attribute 'runn'"):
        testbed.runn


def test_a_file_run_through_the_api_writes_the_command_lines_folder(tiny, tmp_path, capsys):
    file = write_yaml(tmp_path / "tiny.yaml", tiny)
    assert main(["run", str(file), "--set", "client.lr=0.02", "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    cli = tmp_path / "cli" / "tiny" / "0"
    printed = capsys.readouterr().out
    run = testbed.run(file, set=["client.lr=0.02"], out=tmp_path / "api", quiet=True)
    assert run.path == tmp_path / "api" / "tiny" / "0"
    for table in TABLES + ("scenario.resolved.yaml",):
        assert (run.path / table).read_bytes() == (cli / table).read_bytes(), table
    assert run.scenario["client"]["lr"] == 0.02
    # the report beside it: the files the command line listed, and its table, which it printed
    assert [str(p).replace(str(run.path), str(cli)) for p in run.report.files] == [
        line.strip() for line in printed.split("plots:\n")[1].splitlines()]
    assert run.report.text in printed
    tta = run.report.tables["tta"]
    assert tta["final_accuracy"].iloc[0] == run.summary["final_accuracy"] == run.rounds["accuracy"].iloc[-1]
    assert repr(run) == (f"Run({run.path}: fedavg on tiny, seed 0, 2 rounds, completed, final accuracy "
                         f"{run.summary['final_accuracy']:.3f})")


def test_a_dict_and_a_scenario_run_as_their_file_does(tiny, tmp_path):
    file = write_yaml(tmp_path / "tiny.yaml", tiny)
    from_file = testbed.run(file, seed=3, out=tmp_path / "file", quiet=True, plots=False)
    before = json.dumps(tiny)
    from_dict = testbed.run(tiny, set={"seed": 3}, out=tmp_path / "dict", quiet=True, plots=False)
    assert json.dumps(tiny) == before  # the caller's dict is left as it was
    scenario = testbed.validate(file, set=["seed=3"])
    from_object = testbed.run(scenario, out=tmp_path / "object", quiet=True, plots=False)
    for run in (from_dict, from_object):
        assert run.path.parts[-2:] == ("tiny", "3") and run.report is None
        for table in TABLES:
            assert (run.path / table).read_bytes() == (from_file.path / table).read_bytes(), table
    # set= on a Scenario starts from its fields; the object itself is not changed
    assert testbed.validate(scenario, set={"stop.max_rounds": 5}).stop.max_rounds == 5
    assert scenario.stop.max_rounds == 2 and testbed.validate(scenario, seed=7).seed == 7


def test_load_run_reads_back_the_frames_run_returned(tiny, tmp_path):
    run = testbed.run(tiny, out=tmp_path, quiet=True, plots=False)
    again = testbed.load_run(str(run.path))
    for name in ("rounds", "events", "devices"):
        pd.testing.assert_frame_equal(getattr(again, name), getattr(run, name))
    assert again.summary == run.summary == json.loads((run.path / "summary.json").read_text())
    assert again.scenario == run.scenario == yaml.safe_load((run.path / "scenario.resolved.yaml").read_text())
    assert list(again.rounds["round"]) == [1, 2] and len(again.devices) == 2 and again.battery is None
    assert set(again.events["device"]) == {0, 1} and again.report is None


@pytest.mark.slow
def test_seeds_give_a_run_each_and_one_report(tiny, tmp_path):
    runs = testbed.run(tiny, seeds=[1, 0], out=tmp_path, quiet=True)
    assert [r.path for r in runs] == [tmp_path / "tiny" / "1", tmp_path / "tiny" / "0"]
    assert runs[0].report is runs[1].report and (tmp_path / "tiny" / "plots" / "tta_by_scenario.csv").is_file()
    assert list(runs[0].report.tables["tta_by_scenario"]["seeds"]) == [2]
    with pytest.raises(testbed.RunsFailed, match=r"^2 of 2 runs did not complete \(seed 0, seed 1\)") as failed:
        testbed.run(tiny, set={"client.lr": 1e300}, seeds=[0, 1], out=tmp_path / "diverged", quiet=True)
    assert failed.value.runs == [] and isinstance(failed.value, TestbedError)


def test_sweep_takes_a_grid_of_python_values(tiny, tmp_path, capsys):
    index = testbed.sweep(tiny, {"client.lr": (0.01, 0.02), "seed": [0]}, out=tmp_path, quiet=True)
    assert list(index.columns) == ["client.lr", "seed", "folder", "status"]
    assert list(index["status"]) == ["completed"] * 2
    assert list(index["folder"]) == [str(tmp_path / "tiny" / f"tiny-{lr}" / "0") for lr in ("0.01", "0.02")]
    pd.testing.assert_frame_equal(index, pd.read_csv(tmp_path / "tiny" / "sweep.csv"))
    with pytest.raises(TestbedError, match=r"^grid 'seed': no values; list at least one$"):
        testbed.sweep(tiny, {"seed": []}, out=tmp_path)


@pytest.mark.parametrize("call, message", [
    (lambda raw: testbed.run({**raw, "round": {"clients_per_round": 0}}),
     r"^scenario: round\.clients_per_round: Input should be greater than 0 \(got 0\)$"),
    (lambda raw: testbed.validate(raw, set={"fleet.groups.5.count": 1}),
     r"^set fleet\.groups\.5\.count: '5' is not an index of this 2-item list$"),
    (lambda raw: testbed.run(raw, set=["stop.max_rounds"]), r"^--set stop\.max_rounds: expected KEY\.PATH=VALUE"),
    (lambda raw: testbed.run("no/such.yaml"), r"^no/such\.yaml: no such scenario file$"),
    (lambda raw: testbed.run(42), r"^scenario: got an int; give a YAML file's path, a dict or a testbed Scenario$"),
    (lambda raw: testbed.run(raw, jobs=2), r"^jobs and ray run several seeds at once"),
    (lambda raw: testbed.run(raw, seeds=[0, 0]), r"^seeds: 0 is listed twice$"),
])
def test_bad_input_raises_one_line_naming_the_field(tiny, tmp_path, monkeypatch, call, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TestbedError, match=message) as raised:
        call(tiny)
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "runs").exists()


def test_relative_paths_of_a_dict_resolve_against_the_current_folder(tmp_path, monkeypatch):
    raw = yaml.safe_load((ROOT / "scenarios" / "digits.yaml").read_text())
    raw["data"] = {"name": "mnist", "root": "digits_here"}
    (tmp_path / "digits_here").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    assert testbed.validate(raw).data.root == Path("digits_here")
    write_yaml(tmp_path / "elsewhere" / "digits.yaml", raw)  # in a file: against the file's folder
    with pytest.raises(TestbedError, match=r"elsewhere/digits\.yaml: data\.root: no folder at elsewhere/digits_here"):
        testbed.validate(Path("elsewhere/digits.yaml"))


def test_reading_a_missing_or_damaged_run_folder_raises_one_line(tiny, tmp_path):
    with pytest.raises(TestbedError, match=r"no_run: no such folder"):
        testbed.load_run(tmp_path / "no_run")
    run = testbed.run(tiny, out=tmp_path, quiet=True, plots=False)
    with pytest.raises(TestbedError, match=r"pass one of its seed folders: 0$"):
        testbed.load_run(run.path.parent)
    rounds = run.path / "rounds.csv"
    rounds.write_bytes(rounds.read_bytes()[:-3])  # a row torn by a kill
    for read in (testbed.load_run, testbed.report, lambda folder: testbed.compare(folder, out=tmp_path / "c")):
        with pytest.raises(TestbedError, match=r"rounds\.csv: its last row is torn"):
            read(run.path)


def test_report_and_compare_return_what_they_wrote(tiny, tmp_path):
    runs = testbed.run(tiny, seeds=[0, 1], out=tmp_path, quiet=True, plots=False)
    written = testbed.report(runs[0])
    assert written.files[0].parent == runs[0].path / "plots" and all(f.is_file() for f in written.files)
    assert {"tta", "compare"} <= set(written.tables) and (runs[0].path / "plots" / "report.html") in written.files
    compared = testbed.compare(runs, out=tmp_path / "compare", targets=0.5)
    table = compared.tables["compare"]
    assert list(table["seeds"]) == [2] and "time_s@0.5" in table
    assert table["final_accuracy"].iloc[0] == pytest.approx(sum(r.summary["final_accuracy"] for r in runs) / 2)
    with pytest.raises(TestbedError, match="--baseline fedfoo: no group or algorithm of that name"):
        testbed.compare(runs, out=tmp_path / "compare", baseline="fedfoo")


def test_the_progress_bar_is_tqdm_auto(tiny, tmp_path, monkeypatch):
    """tqdm.auto picks Jupyter's widget in a notebook, the text bar elsewhere: the runner must ask it."""
    import tqdm.auto

    bars = []

    class Recording(tqdm.auto.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            bars.append(self)

    monkeypatch.setattr(tqdm.auto, "tqdm", Recording)
    testbed.run(tiny, out=tmp_path, plots=False)
    assert len(bars) == 1 and bars[0].total == 2 and bars[0].n == 2


EVIL = """\
from pathlib import Path
Path({marker!r}).write_text("imported")
Strategy = make = None
"""


def test_reading_a_run_folder_never_imports_the_code_it_names(tiny, tmp_path, monkeypatch):
    """A received run folder whose scenario names plugin code: load_run, report and compare, in-process and as
    `python -m testbed report / compare`, read it without importing that code."""
    run = testbed.run(tiny, out=tmp_path / "runs", quiet=True, plots=False)
    resolved = run.path / "scenario.resolved.yaml"
    scenario = yaml.safe_load(resolved.read_text())
    scenario["algorithm"]["name"] = "evil_plugin_mod:Strategy"
    scenario["model"]["name"] = "evil_plugin_mod:make"
    resolved.write_text(yaml.safe_dump(scenario, sort_keys=False))
    plugins, marker = tmp_path / "plugins", tmp_path / "imported.txt"
    plugins.mkdir()
    (plugins / "evil_plugin_mod.py").write_text(EVIL.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(plugins))
    monkeypatch.chdir(plugins)

    assert testbed.load_run(run.path).scenario["algorithm"]["name"] == "evil_plugin_mod:Strategy"
    assert testbed.report(run.path, out=tmp_path / "report").tables["tta"]["algorithm"][0] == "evil_plugin_mod:Strategy"
    testbed.compare([run.path], out=tmp_path / "compare")
    for command in ("report", "compare"):
        done = _python("-m", "testbed", command, str(run.path), "--out", str(tmp_path / f"cli_{command}"),
                       cwd=plugins, path=(plugins,))
        assert done.returncode == 0, done.stderr
    assert not marker.exists() and "evil_plugin_mod" not in sys.modules
    # the trap works: importing the module from there writes the marker
    assert _python("-c", "import evil_plugin_mod", cwd=plugins).returncode == 0 and marker.exists()
