"""--resume over tables changed since the checkpoint: what the run wrote after it (the rounds it plays again, a row
torn by a kill) is dropped in one line naming the lines; anything else (lines added after a finished run's last
round, lines past the checkpoint that are not the run's rows, rows before the checkpoint changed or removed) is
refused in one line naming the file and the lines, and the file is left as it was: nothing a user wrote is lost."""
import pytest
from helpers import run_killed_after, tiny_blobs, tiny_scenario

import testbed.data
from testbed import scenario as sc
from testbed.errors import TestbedError
from testbed.runner import run_scenario

# 7 rounds of FedAvg on the tiny data set, a checkpoint every 3 rounds
RAW = tiny_scenario({"name": "fedavg"}, rounds=7) | {"checkpoint": {"every_rounds": 3}}


@pytest.fixture(autouse=True)
def _tiny_blobs(monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)


def _resume(out):
    return run_scenario(sc.validate(RAW, "test"), "test", out, quiet=True, resume=True)


def _killed_after_round_5(out):
    """A run killed after round 5's rows were written: its checkpoint is round 3's."""
    run_killed_after(RAW, out, 5)
    return out / "tiny" / "0"


def test_the_rows_a_killed_run_wrote_after_its_checkpoint_are_dropped_in_one_line(tmp_path, capsys):
    reference, _ = run_scenario(sc.validate(RAW, "test"), "test", tmp_path / "unbroken", quiet=True)
    run = _killed_after_round_5(tmp_path / "broken")
    with open(run / "rounds.csv", "ab") as f:
        f.write(b"6,5.0")  # a row torn by a kill in mid-write
    events = (run / "events.csv").read_bytes().count(b"\n")   # header + 2 devices x 3 phases x 5 rounds
    assert events == 31
    capsys.readouterr()
    assert _resume(tmp_path / "broken")[0] == run
    # rounds.csv: the header, rounds 1-3 (lines 2-4) kept; rounds 4, 5 and the torn row (lines 5-7) dropped
    assert capsys.readouterr().err.splitlines() == [
        f"resume: dropped rounds.csv lines 5-7, events.csv lines 20-31 of {run}, past the checkpoint at round 3: "
        "the run plays those rounds again"]
    for table in ("rounds.csv", "events.csv"):
        assert (run / table).read_bytes() == (reference / table).read_bytes()


def test_lines_added_to_a_finished_run_are_refused_and_kept(tmp_path):
    run, _ = run_scenario(sc.validate(RAW, "test"), "test", tmp_path, quiet=True)
    with open(run / "rounds.csv", "ab") as f:
        f.write(b"8,60.0,61.0,2,2,2,0,0,0\r\nmy note\r\n")
    before = (run / "rounds.csv").read_bytes()
    with pytest.raises(TestbedError) as refused:
        _resume(tmp_path)
    assert str(refused.value) == (
        f"{run / 'rounds.csv'}: lines 9-10 after the run's last round (7); --resume would drop them: move them to "
        "another file, then resume again (or run without --resume to start over)")
    assert (run / "rounds.csv").read_bytes() == before


def test_a_line_past_the_checkpoint_that_the_run_did_not_write_is_refused(tmp_path):
    run = _killed_after_round_5(tmp_path)
    with open(run / "rounds.csv", "ab") as f:
        f.write(b"my note\r\n")   # after rounds 4 and 5 (lines 5, 6): line 7
    before = (run / "rounds.csv").read_bytes()
    with pytest.raises(TestbedError, match=r"rounds.csv: lines 5-7 past the checkpoint \(round 3\) that are not "
                                           r"rows the run wrote; --resume would drop them"):
        _resume(tmp_path)
    assert (run / "rounds.csv").read_bytes() == before


def test_rounds_out_of_order_past_the_checkpoint_are_refused(tmp_path):
    run = _killed_after_round_5(tmp_path)
    rows = (run / "rounds.csv").read_bytes().split(b"\r\n")
    (run / "rounds.csv").write_bytes(b"\r\n".join(rows[:4] + [rows[5], rows[4]] + rows[6:]))  # rounds 5, 4
    with pytest.raises(TestbedError, match=r"rounds.csv: lines 5-6 past the checkpoint \(round 3\)"):
        _resume(tmp_path)


def test_a_row_changed_before_the_checkpoint_is_refused(tmp_path):
    run, _ = run_scenario(sc.validate(RAW, "test"), "test", tmp_path, quiet=True)
    data = (run / "rounds.csv").read_bytes()
    line = data.split(b"\r\n")[2]   # round 2
    (run / "rounds.csv").write_bytes(data.replace(line, line.replace(b"2,", b"9,", 1), 1))  # the same length
    with pytest.raises(TestbedError) as refused:
        _resume(tmp_path)
    assert str(refused.value) == (
        f"{run / 'rounds.csv'}: its first 8 lines (up to the checkpoint at round 7) were changed since the run wrote "
        "them; restore them, or run without --resume to start over")


def test_a_row_removed_before_the_checkpoint_is_refused(tmp_path):
    run, _ = run_scenario(sc.validate(RAW, "test"), "test", tmp_path, quiet=True)
    rows = (run / "rounds.csv").read_bytes().split(b"\r\n")
    (run / "rounds.csv").write_bytes(b"\r\n".join(rows[:2] + rows[3:]))   # round 2 removed
    with pytest.raises(TestbedError, match="rounds.csv: shorter than its checkpoint says"):
        _resume(tmp_path)


@pytest.mark.parametrize("damage, says", [("stream key", "KeyError: 'has_uint32'"),
                                          ("stream of another kind", "ValueError: state must be for a PCG64 RNG")])
def test_a_checkpoint_that_loads_but_holds_damaged_values_is_refused_in_one_line(tmp_path, damage, says):
    # a byte garbled inside one of its dict keys leaves the pickle whole (the fuzz test found 'has_uint32' so)
    import torch

    from testbed import checkpoint
    run = _killed_after_round_5(tmp_path)
    saved = torch.load(run / checkpoint.FILE, weights_only=False)
    if damage == "stream key":
        saved["selection"]["has_uint3\x00"] = saved["selection"].pop("has_uint32")
    else:
        saved["strategy_rng"] = {"bit_generator": "MT19937"}
    torch.save(saved, run / checkpoint.FILE)
    with pytest.raises(TestbedError) as refused:
        _resume(tmp_path)
    assert str(refused.value) == (f"checkpoint.pt is damaged ({says}); run without --resume to start over "
                                  f"(rounds so far kept in {run})")
