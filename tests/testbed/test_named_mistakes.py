"""A newcomer's mistakes end in one line that names the real mistake (exit code 2): a misspelt key with the closest
valid one, a key given twice with its lines, a YAML 1.1 boolean word where text is meant, a directory given as the
scenario, a fleet too large for the machine's memory (with the count and the limit), a report target outside
[0, 1]."""
import re

import pytest
import yaml
from helpers import TWO_DEVICES, write_yaml

import testbed
from testbed.cli import main
from testbed.errors import TestbedError
from testbed.scenario_file import UniqueKeyLoader
from testbed.schema import fleet


def _error(capsys) -> str:
    """The one line on stderr, without its 'error: '."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err.removeprefix("error: ").rstrip("\n")


SPELLING = "unknown key; remove it or correct its spelling"


@pytest.mark.parametrize("path, key, message", [
    ((), "clent", f"clent: {SPELLING}: did you mean 'client'? (and 1 more)"),  # the other: client missing
    (("stop",), "max_round", f"stop.max_round: {SPELLING}: did you mean 'max_rounds'?"),
    (("fleet", "groups", 0), "cuont", f"fleet.groups.0.cuont: {SPELLING}: did you mean 'count'? (and 1 more)"),
    (("fleet", "groups", 0, "availability"), "mean_onn_s",  # inside a tagged union: the markov kind's keys
     f"fleet.groups.0.availability.mean_onn_s: {SPELLING}: did you mean 'mean_on_s'? (and 1 more)"),
    ((), "zzzz", f"zzzz: {SPELLING}"),  # nothing close: no guess
])
def test_a_misspelt_key_is_named_with_the_closest_valid_one(path, key, message, tmp_path, capsys):
    raw = yaml.safe_load(yaml.safe_dump(TWO_DEVICES))
    raw["fleet"]["groups"][0]["availability"] = {"kind": "markov", "mean_on_s": 60, "mean_off_s": 60}
    node = raw
    for part in path:
        node = node[part]
    correct = {"clent": "client", "max_round": "max_rounds", "cuont": "count", "mean_onn_s": "mean_on_s"}.get(key)
    node[key] = node.pop(correct) if correct else 1
    file = write_yaml(tmp_path / "s.yaml", raw)
    assert main(["validate", str(file)]) == 2
    assert _error(capsys) == f"{file}: {message}"


def test_a_key_given_twice_is_refused_with_its_lines(tmp_path, capsys):
    file = tmp_path / "twice.yaml"
    file.write_text(yaml.safe_dump(TWO_DEVICES, sort_keys=False) + "seed: 3\n")
    line = file.read_text().count("\n")
    assert main(["validate", str(file)]) == 2
    assert _error(capsys) == (f"{file}:{line}: not valid YAML ('seed' is given twice in one mapping, first at line "
                              "2; keep one of them)")
    file.write_text("stop: {max_rounds: 2, max_rounds: 3}\n")  # in a flow mapping, on one line
    assert main(["validate", str(file)]) == 2
    assert "'max_rounds' is given twice in one mapping, first at line 1" in _error(capsys)
    # a merge key's values may be overridden: that is what it is for
    assert yaml.load("a: &b {x: 1}\nc: {<<: *b, x: 2}\n", Loader=UniqueKeyLoader) == {
        "a": {"x": 1}, "c": {"x": 2}}


@pytest.mark.parametrize("text, message", [
    ("{kind: off}", "fleet.groups.0.availability.kind: unknown 'False'; choose one of: 'always_on', 'markov', "
     "'diurnal', 'trace'; YAML reads off, no and false as the boolean False: quote the word, e.g. 'off'"),
    ("{kind: yes}", "fleet.groups.0.availability.kind: unknown 'True'; choose one of: 'always_on', 'markov', "
     "'diurnal', 'trace'; YAML reads on, yes and true as the boolean True: quote the word, e.g. 'on'"),
])
def test_a_yaml_boolean_word_where_text_is_meant_says_to_quote_it(text, message, tmp_path, capsys):
    file = write_yaml(tmp_path / "s.yaml", TWO_DEVICES)
    assert main(["validate", str(file), "--set", f"fleet.groups.0.availability={text}"]) == 2
    assert _error(capsys) == f"{file}: {message}"
    assert main(["validate", str(file), "--set", "name=no"]) == 2
    assert _error(capsys) == (f"{file}: name: Input should be a valid string (got False); YAML reads off, no and "
                              "false as the boolean False: quote the word, e.g. 'off'")


def test_a_directory_given_as_the_scenario_says_so(tmp_path, capsys):
    assert main(["validate", str(tmp_path)]) == 2
    assert _error(capsys) == f"{tmp_path}: a directory, not a scenario file; give a YAML file"
    write_yaml(tmp_path / "b.yaml", TWO_DEVICES), write_yaml(tmp_path / "a.yaml", TWO_DEVICES)
    assert main(["run", str(tmp_path)]) == 2
    assert _error(capsys) == f"{tmp_path}: a directory, not a scenario file; give a YAML file, e.g. {tmp_path}/a.yaml"


def test_a_fleet_too_large_for_the_memory_is_refused_with_the_count_and_the_limit(tmp_path, capsys, monkeypatch):
    file = write_yaml(tmp_path / "s.yaml", TWO_DEVICES)
    monkeypatch.setattr(fleet, "physical_memory", lambda: 16 * 2**30)
    limit = 8 * 2**30 // 371  # half the memory, 371 bytes a device: 23,153,462
    assert fleet.BUILD_BYTES_PER_DEVICE == 371 and limit == 23_153_462
    assert main(["validate", str(file), "--set", f"fleet.groups.0.count={limit - 1}"]) == 0  # and the other one
    capsys.readouterr()
    assert main(["run", str(file), "--set", f"fleet.groups.0.count={limit}", "--out", str(tmp_path)]) == 2
    assert _error(capsys) == (f"{file}: fleet: 23,153,463 devices are more than this machine can build: at most "
                              "23,153,462 (371 bytes a device, in half its 16.0 GiB of memory); lower the groups' "
                              "counts")
    assert not (tmp_path / "two_devices").exists()
    monkeypatch.undo()  # this machine: a billion devices would take 371 GB
    assert main(["validate", str(file), "--set", "fleet.groups.0.count=1000000000"]) == 2
    assert "fleet: 1,000,000,001 devices are more than this machine can build: at most " in _error(capsys)


@pytest.mark.parametrize("value", ["90", "-0.1", "1.5"])
def test_a_report_target_outside_0_1_is_refused_naming_it(value, tmp_path, capsys):
    message = f"target accuracy {float(value)!r} is outside [0, 1]; give it as a fraction, e.g. 0.9"
    assert main(["report", str(tmp_path), "--target", "0.5", "--target", value]) == 2
    assert _error(capsys) == message
    with pytest.raises(TestbedError, match=f"^{re.escape(message)}$"):
        testbed.compare([tmp_path], targets=float(value))
