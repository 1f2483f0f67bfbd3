"""What a user sees (issue 46): `testbed run`, `sweep` and `report` print lines of at most 100 columns, and name the
paths under the current folder relative to it, even when given them absolute."""
import re

import pytest
from helpers import tiny_blobs, tiny_scenario, write_yaml

import testbed.data
from testbed.cli import main
from testbed.paths import user_path

WIDTH = 100


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    """A user's folder, made the current one, holding the quick start's shape on the tiny data: a target, so that
    the table has its columns, and three rounds."""
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    monkeypatch.chdir(tmp_path)
    raw = tiny_scenario({"name": "fedavg"}, rounds=3)
    raw["stop"]["target_accuracy"] = 0.9
    write_yaml(tmp_path / "tiny.yaml", raw)
    return tmp_path


def printed(capsys) -> tuple[str, list[str]]:
    """What the command printed, stdout then stderr, and the lines of both as a terminal shows them (the progress
    bar redraws itself after each carriage return)."""
    said = capsys.readouterr()
    return said.out + said.err, re.split(r"[\r\n]", said.out) + re.split(r"[\r\n]", said.err)


def listed(text: str, heading: str) -> list[str]:
    """The paths listed under a heading ("plots:"), one a line, indented."""
    lines = text.splitlines()
    after = lines[lines.index(heading) + 1:]
    return [line.strip() for line in after[:next((i for i, line in enumerate(after) if not line.startswith("  ")),
                                                  len(after))]]


def fits(lines: list[str]) -> list[str]:
    """The lines wider than WIDTH, each with its width: none, where the output fits."""
    return [f"{len(line)}: {line}" for line in lines if len(line) > WIDTH]


def test_run_sweep_and_report_print_within_100_columns_and_relative_paths(user_folder, capsys):
    out = str(user_folder / "runs")   # given absolute, as a script would: printed relative all the same
    assert main(["run", "tiny.yaml", "--out", out]) == 0   # with its progress bar
    text, lines = printed(capsys)
    assert fits(lines) == [] and str(user_folder) not in text
    assert "run folder: runs/tiny/0 (2 per round)" in lines and "time_s@0.9" in text
    plots = listed(text, "plots:")
    assert plots and all((user_folder / path).is_file() for path in plots)

    assert main(["run", "tiny.yaml", "--out", out, "--quiet"]) == 0   # done already: one line says so
    text, lines = printed(capsys)
    assert text.startswith("runs/tiny/0: holds this scenario's completed run;") and fits(lines) == []

    assert main(["sweep", "tiny.yaml", "--grid", "seed=[0,1]", "--out", str(user_folder / "swept"), "--quiet"]) == 0
    text, lines = printed(capsys)
    assert fits(lines) == [] and str(user_folder) not in text
    assert "index: swept/tiny/sweep.csv" in lines and any(line.endswith(" swept/tiny/tiny/1 completed")
                                                          for line in lines)

    assert main(["report", str(user_folder / "swept"), str(user_folder / "runs")]) == 0
    text, lines = printed(capsys)
    assert fits(lines) == [] and str(user_folder) not in text
    written = listed(text, "written:")
    assert "report/report.html" in written and all((user_folder / path).is_file() for path in written)


def test_an_error_naming_a_run_folder_names_it_relative(user_folder, capsys):
    assert main(["run", "tiny.yaml", "--out", str(user_folder / "runs"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["run", "tiny.yaml", "--out", str(user_folder / "runs"), "--quiet", "--set", "client.lr=0.02"]) == 2
    assert capsys.readouterr().err.startswith("error: runs/tiny/0: holds a run of another scenario (client.lr: ")


def test_a_path_reads_relative_only_under_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert user_path(tmp_path / "runs" / "x" / "0") == "runs/x/0" and user_path(tmp_path) == "."
    assert user_path("runs/x/0") == "runs/x/0" and user_path("./runs//x") == "runs/x"
    elsewhere = tmp_path.parent / "elsewhere" / "0"
    assert user_path(elsewhere) == str(elsewhere)   # outside: absolute, not a chain of '../'
    assert user_path("../x") == "../x"              # as given: no '..' folded, no symlink resolved
