"""Fuzzing the boundary of user errors (hypothesis): mutated committed scenarios, random --set values and damaged
run folders must each validate (or run) or end in one line with exit code 2, never a traceback nor the
internal-error exit code. The default run tries a bounded number of examples; `pytest -m slow` tries many more."""
from __future__ import annotations

import copy
import random
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import ROOT, tiny_blobs, tiny_scenario, write_yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import testbed.data
from testbed.cli import main

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
ODD_VALUES = [None, "", "nope", -1, 0, 0.5, 1e308, float("inf"), float("-inf"), float("nan"), True, [], {}, [1, 2],
              {"kind": "nope"}, 2**70, "../../etc/passwd", "\u00e9\u4e2d"]
SET_VALUES = ["", ".inf", "-.inf", ".nan", "1e400", "[1, 2]", "{kind: x}", "-5", "0", "abc", "null", "0x10", "'1'",
              "true", "[", "{a: [}", "\t", "999999999999999999999"]
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SLOW = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def cli(argv: list[str]) -> int:
    """main(argv)'s exit code, as the shell sees it (argparse ends a bad flag with SystemExit)."""
    try:
        return main(argv)
    except SystemExit as exit:
        return exit.code


def ends_as_promised(code: int, err: str) -> None:
    """Exit 0, or exit 2 with one line of error (warnings aside); never a traceback or an internal error."""
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert code == 0 or (code == 2 and len(lines) == 1 and lines[0].startswith("error: ")), (code, err)


def paths(value, prefix=()):
    """Every key path of a YAML value, the containers' too."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, prefix + (index,))


def mutated(raw: dict, data) -> dict:
    raw = copy.deepcopy(raw)
    where = data.draw(st.sampled_from([p for p in paths(raw) if p]))
    parent = raw
    for key in where[:-1]:
        parent = parent[key]
    if data.draw(st.booleans()) and isinstance(parent, dict):
        del parent[where[-1]]
    else:
        parent[where[-1]] = data.draw(st.sampled_from(ODD_VALUES))
    return raw


def validate_mutations(data, tmp_path, capsys):
    source = data.draw(st.sampled_from(SCENARIOS))
    file = tmp_path / source.name
    if data.draw(st.integers(0, 9)) == 0:  # now and then not YAML at all
        file.write_bytes(data.draw(st.binary(max_size=200)))
    else:
        file.write_text(yaml.safe_dump(mutated(yaml.safe_load(source.read_text()), data), allow_unicode=True))
    ends_as_promised(cli(["validate", str(file)]), capsys.readouterr().err)


@FAST
@given(data=st.data())
def test_mutated_scenarios_validate_or_fail_in_one_line(data, tmp_path, capsys):
    validate_mutations(data, tmp_path, capsys)


@pytest.mark.slow
@SLOW
@given(data=st.data())
def test_mutated_scenarios_validate_or_fail_in_one_line_long(data, tmp_path, capsys):
    validate_mutations(data, tmp_path, capsys)


def set_values(data, capsys):
    source = data.draw(st.sampled_from(SCENARIOS))
    where = data.draw(st.sampled_from([p for p in paths(yaml.safe_load(source.read_text())) if p]))
    key = ".".join(str(k) for k in where) if data.draw(st.integers(0, 4)) else data.draw(st.text(max_size=12))
    value = data.draw(st.sampled_from(SET_VALUES) | st.text(max_size=12))
    ends_as_promised(cli(["validate", str(source), "--set", f"{key}={value}"]), capsys.readouterr().err)


@FAST
@given(data=st.data())
def test_random_set_values_validate_or_fail_in_one_line(data, capsys):
    set_values(data, capsys)


@pytest.mark.slow
@SLOW
@given(data=st.data())
def test_random_set_values_validate_or_fail_in_one_line_long(data, capsys):
    set_values(data, capsys)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished two-round run folder of the tiny scenario (its YAML beside it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
        root = tmp_path_factory.mktemp("fuzz")
        file = write_yaml(root / "tiny.yaml", tiny_scenario({"name": "fedavg"}, rounds=3) | {
            "checkpoint": {"every_rounds": 1}})
        assert main(["run", str(file), "--out", str(root / "runs"), "--quiet"]) == 0
        return file, root / "runs" / "tiny" / "0"


RUN_FILES = ["rounds.csv", "events.csv", "summary.json", "checkpoint.pt", "devices.csv", "scenario.resolved.yaml"]


def damage(data, path: Path) -> None:
    content = path.read_bytes()
    how = data.draw(st.sampled_from(["truncate", "garble", "replace", "empty"]))
    if how == "truncate":
        content = content[: data.draw(st.integers(0, max(len(content) - 1, 0)))]
    elif how == "garble":
        rng = random.Random(data.draw(st.integers(0, 2**32)))
        content = bytearray(content)
        for _ in range(data.draw(st.integers(1, 20))):
            content[rng.randrange(len(content))] = rng.randrange(256)
        content = bytes(content)
    elif how == "replace":
        content = data.draw(st.binary(max_size=300))
    else:
        content = b""
    path.write_bytes(content)


def damaged_folders(data, finished_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    file, original = finished_run
    run = tmp_path / "runs" / "tiny" / "0"
    shutil.copytree(original, run)
    for name in data.draw(st.lists(st.sampled_from(RUN_FILES), min_size=1, max_size=2, unique=True)):
        damage(data, run / name)
    command = data.draw(st.sampled_from(["report", "resume", "compare"]))
    if command == "report":
        code = cli(["report", str(run), "--out", str(tmp_path / "plots")])
    elif command == "compare":
        code = cli(["compare", str(run), "--out", str(tmp_path / "compare")])
    else:
        code = cli(["run", str(file), "--out", str(tmp_path / "runs"), "--quiet", "--resume"])
    ends_as_promised(code, capsys.readouterr().err)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_run_folders_report_resume_or_fail_in_one_line(data, finished_run, tmp_path_factory, capsys,
                                                               monkeypatch):
    damaged_folders(data, finished_run, tmp_path_factory.mktemp("damaged"), capsys, monkeypatch)


@pytest.mark.slow
@SLOW
@given(data=st.data())
def test_damaged_run_folders_report_resume_or_fail_in_one_line_long(data, finished_run, tmp_path_factory, capsys,
                                                                    monkeypatch):
    damaged_folders(data, finished_run, tmp_path_factory.mktemp("damaged"), capsys, monkeypatch)
