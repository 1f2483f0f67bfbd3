"""`testbed validate` answers without importing torch: a file that does not read as a scenario mapping before the
schema is imported, a schema error (a misspelt key, an unknown name, a wrong type) and a valid scenario by a
schema that knows the built-in names from testbed/names.py and imports an algorithm's code only to build it.
Checked in a fresh interpreter, where sys.modules says what was imported. benchmarks/validate_latency.py times it."""
import os
import subprocess
import sys

import pytest
from helpers import ROOT

CHECK = ("import sys; from testbed.cli import main; code = main(sys.argv[1:]); "
         "print(code, 'torch' in sys.modules, file=sys.stderr)")


def _validate(*args: str, cwd) -> tuple[str, str]:
    """`testbed validate ARGS` in a fresh interpreter with this worktree's code: its error line, and its exit code
    with whether torch was imported."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", CHECK, "validate", *args], cwd=cwd, env=env, capture_output=True,
                          text=True)
    *lines, verdict = done.stderr.splitlines()
    return "\n".join(lines), verdict


@pytest.mark.parametrize("text, args, error", [
    ("name: [x\n", (), "s.yaml:2: not valid YAML"),                      # a syntax error
    ("name: a\nname: b\n", (), "'name' is given twice in one mapping"),  # a key twice
    ("- a list\n", (), "s.yaml: a scenario is a YAML mapping"),
    ("name: a\n", ("--set", "stop.max_rounds"), "--set stop.max_rounds: expected KEY.PATH=VALUE"),
])
def test_a_malformed_file_is_answered_without_torch(text, args, error, tmp_path):
    (tmp_path / "s.yaml").write_text(text)
    line, verdict = _validate("s.yaml", *args, cwd=tmp_path)
    assert error in line and verdict == "2 False", (line, verdict)


def test_a_directory_or_a_missing_file_without_torch(tmp_path):
    assert _validate(".", cwd=tmp_path) == ("error: .: a directory, not a scenario file; give a YAML file", "2 False")
    assert _validate("no.yaml", cwd=tmp_path) == ("error: no.yaml: no such scenario file", "2 False")


QUICKSTART = (ROOT / "scenarios" / "quickstart.yaml").read_text()


@pytest.mark.parametrize("old, new, error", [
    ("\nclient:", "\nclent:", "clent: unknown key; remove it or correct its spelling: did you mean 'client'?"),
    ("name: fedavg}", "name: fedavgg}", "algorithm.name: unknown 'fedavgg'; choose one of: 'fedavg'"),
    ("name: cnn_512}", "name: cnn_521}", "model.name: unknown model 'cnn_521'"),
    ("name: mnist5k\n", "name: mnist5k\n  options: {seq_len: 3}\n", "data.options: seq_len is not an option"),
    ("name: mnist5k\n", "name: mnist5k\n  root: .\n", "dataset 'mnist5k' ships with the testbed; remove data.root"),
    ("max_rounds: 60", "max_rounds: many", "stop.max_rounds"),
])
def test_a_schema_error_is_answered_without_torch(old, new, error, tmp_path):
    assert old in QUICKSTART   # the mistake is made in the quickstart, valid otherwise
    (tmp_path / "s.yaml").write_text(QUICKSTART.replace(old, new, 1))
    line, verdict = _validate("s.yaml", cwd=tmp_path)
    assert error in line and verdict == "2 False", (line, verdict)


@pytest.mark.parametrize("scenario", ["quickstart.yaml", "fedlps_mnist_fjord.yaml", "feddumap.yaml", "fedbuff.yaml"])
def test_a_valid_scenario_is_validated_without_torch(scenario, tmp_path):
    line, verdict = _validate(str(ROOT / "scenarios" / scenario), cwd=tmp_path)
    assert verdict == "0 False", (line, verdict)


def test_a_plugin_is_imported_when_validated(tmp_path):
    """User code is imported (and torch with it, as a Strategy's module imports it): that is what validating a
    scenario that names it means; only the testbed's own heavy modules wait for the run."""
    (tmp_path / "mine.py").write_text("from testbed.algorithms import FedAvg\n\n\nclass Mine(FedAvg):\n    pass\n")
    (tmp_path / "s.yaml").write_text(QUICKSTART.replace("name: fedavg}", "name: 'mine:Mine'}", 1))
    assert _validate("s.yaml", cwd=tmp_path) == ("", "0 True")
