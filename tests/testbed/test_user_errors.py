"""The one boundary of user errors (cli.main): bad input of every kind ends in one line and exit code 2, a bug in
one line naming the file that holds its traceback (exit code 1), and nothing already written is lost."""
import json

import pytest
from helpers import tiny_blobs, tiny_scenario, write_yaml

import testbed.data
from testbed.cli import main


@pytest.fixture
def scenario(tmp_path, monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    return write_yaml(tmp_path / "tiny.yaml", tiny_scenario({"name": "fedavg"}, rounds=2))


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_scenario_that_is_not_utf8_text(tmp_path, capsys):
    file = tmp_path / "latin1.yaml"
    file.write_bytes("name: caf\xe9\n".encode("latin-1"))
    assert main(["validate", str(file)]) == 2
    assert "latin1.yaml: not UTF-8 text (byte 9); save the scenario as UTF-8 YAML" in one_line(capsys)


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1e400"])
def test_non_finite_numbers_are_refused_by_the_schema(scenario, capsys, value):
    assert main(["validate", str(scenario), "--set", f"client.lr={value}"]) == 2
    assert "client.lr: Input should be a finite number" in one_line(capsys)


def test_an_out_folder_that_cannot_be_made(scenario, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["run", str(scenario), "--out", str(blocker / "runs"), "--quiet"]) == 2
    assert one_line(capsys).startswith(f"error: {blocker / 'runs'}")


def test_a_bug_is_one_line_naming_its_traceback_and_the_rounds_stay(scenario, tmp_path, capsys, monkeypatch):
    from testbed.runlog import RunWriter

    write_round = RunWriter.round

    def second_round_breaks(self, record, events):
        if record["round"] == 2:
            raise ZeroDivisionError("a bug")
        write_round(self, record, events)

    monkeypatch.setattr(RunWriter, "round", second_round_breaks)
    assert main(["run", str(scenario), "--out", str(tmp_path), "--quiet"]) == 1
    err = one_line(capsys)
    run = tmp_path / "tiny" / "0"
    assert err.startswith("internal error (ZeroDivisionError: a bug): a bug in the testbed, not in your input")
    assert f"traceback in {run / 'error.log'}" in err
    assert "second_round_breaks" in (run / "error.log").read_text()
    assert json.loads((run / "summary.json").read_text())["status"] == "crashed: ZeroDivisionError: a bug"
    assert (run / "rounds.csv").read_text().count("\n") == 2  # the header and round 1
    with pytest.raises(ZeroDivisionError):
        main(["run", str(scenario), "--out", str(tmp_path / "again"), "--quiet", "--debug"])


def test_a_bug_outside_a_run_writes_its_traceback_to_a_temporary_file(scenario, capsys, monkeypatch):
    from pathlib import Path

    import testbed.scenario_file as sc   # the schema's validation (testbed/validation.py calls its validate)

    monkeypatch.setattr(sc, "validate", lambda *a, **k: 1 / 0)
    assert main(["validate", str(scenario)]) == 1
    log = Path(one_line(capsys).split("traceback in ")[1].split(";")[0])
    assert "ZeroDivisionError" in log.read_text()
    log.unlink()


class _DiskFills:
    """A table's file handle on a disk that fills up after `room` more bytes."""

    def __init__(self, handle, room: int):
        self.handle, self.room = handle, room

    def write(self, data) -> int:
        if len(data) > self.room:
            self.handle.write(data[: self.room])
            self.room = 0
            raise OSError(28, "No space left on device", str(self.path))
        self.room -= len(data)
        return self.handle.write(data)

    def __getattr__(self, name):
        return getattr(self.handle, name)


def test_a_full_disk_leaves_no_torn_row_and_the_summary_says_so(scenario, tmp_path, capsys, monkeypatch):
    from testbed.runlog import RunWriter

    write = RunWriter._write

    def disk_fills_in_round_2(handle, rows, columns):
        if rows and rows[0].get("round") == 2 and "t_start_s" in rows[0]:  # rounds.csv's row of round 2
            full = _DiskFills(handle, room=7)
            full.path = "rounds.csv"
            return write(full, rows, columns)
        return write(handle, rows, columns)

    monkeypatch.setattr(RunWriter, "_write", staticmethod(disk_fills_in_round_2))
    assert main(["run", str(scenario), "--out", str(tmp_path), "--quiet"]) == 2
    assert one_line(capsys) == ("error: rounds.csv: No space left on device; check the path and that it can be "
                                "written\n")
    run = tmp_path / "tiny" / "0"
    rounds = (run / "rounds.csv").read_bytes()
    assert rounds.count(b"\r\n") == 2 and rounds.endswith(b"\r\n")  # the header and round 1, whole
    assert json.loads((run / "summary.json").read_text())["status"].startswith("failed: OSError: [Errno 28]")


def test_a_run_folder_removed_mid_run_says_so_in_one_line_and_a_new_summary(scenario, tmp_path, capsys,
                                                                          monkeypatch):
    import shutil

    from testbed.runlog import RunWriter

    write_round = RunWriter.round

    def removed_before_round_2(writer, record, events):
        if record["round"] == 2:
            shutil.rmtree(writer.path)
        return write_round(writer, record, events)

    monkeypatch.setattr(RunWriter, "round", removed_before_round_2)
    assert main(["run", str(scenario), "--out", str(tmp_path), "--quiet"]) == 2
    run = tmp_path / "tiny" / "0"
    message = (f"{run}: the run folder was removed while the run was writing it (round 2); its tables are lost, "
               "so run it again")
    assert one_line(capsys) == f"error: {message}\n"
    assert sorted(p.name for p in run.iterdir()) == ["summary.json"]
    assert json.loads((run / "summary.json").read_text())["status"] == f"failed: {message}"
