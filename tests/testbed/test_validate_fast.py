"""`testbed validate` of a malformed scenario answers before torch is imported (the schema imports it, through the
algorithms; a file that does not read as a scenario mapping never gets that far): checked in a fresh
interpreter, where sys.modules says what was imported. benchmarks/validate_latency.py times it."""
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


def test_a_directory_or_a_missing_file_without_torch_and_a_valid_one_with_it(tmp_path):
    assert _validate(".", cwd=tmp_path) == ("error: .: a directory, not a scenario file; give a YAML file", "2 False")
    assert _validate("no.yaml", cwd=tmp_path) == ("error: no.yaml: no such scenario file", "2 False")
    # the check can fail: a valid scenario is validated by the schema, which imports torch
    assert _validate(str(ROOT / "scenarios" / "quickstart.yaml"), cwd=tmp_path) == ("", "0 True")
