"""A run folder that already holds a run is never replaced silently (runlog.claim), from the command line and from
Python alike: this scenario's completed run is left as it is and said so in one line (exit code 0); another
scenario's run, or this scenario's unfinished one, is refused in one line that says how to go on; --overwrite
replaces the run, all of it; --resume goes on as before."""
import pytest
from helpers import run_killed_after, tiny_blobs, tiny_scenario, write_yaml

import testbed
import testbed.data
from testbed.cli import main
from testbed.errors import TestbedError


@pytest.fixture
def tiny(monkeypatch) -> dict:
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    return tiny_scenario({"name": "fedavg"})


def _files(folder) -> dict:
    """Every file of the folder with its bytes and modification time: what 'nothing rewritten' means."""
    return {p.relative_to(folder): (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def test_the_command_line_keeps_a_run_and_says_how_to_go_on(tiny, tmp_path, capsys):
    file = write_yaml(tmp_path / "tiny.yaml", tiny)
    run = ["run", str(file), "--out", str(tmp_path / "runs"), "--quiet"]
    folder = tmp_path / "runs" / "tiny" / "0"
    assert main(run) == 0
    capsys.readouterr()
    before = _files(folder)

    assert main(run) == 0  # the same scenario, completed: done, nothing run again
    said = capsys.readouterr()
    assert said.out == (f"{folder}: holds this scenario's completed run; nothing rerun (--overwrite runs it "
                        "again)\n") and said.err == ""
    assert _files(folder) == before

    assert main(run + ["--set", "client.lr=0.02"]) == 2  # another scenario: refused, the run kept
    said = capsys.readouterr()
    assert said.err == (f"error: {folder}: holds a run of another scenario (client.lr: 0.01 there, 0.02 now); run "
                        "into another --out, or replace it with --overwrite (--resume goes on with the same scenario "
                        "only)\n") and said.out == ""
    assert _files(folder) == before

    (folder / "battery.csv").write_text("a table of the old run's that the new one does not write\n")
    assert main(run + ["--set", "client.lr=0.02", "--overwrite"]) == 0
    assert testbed.load_run(folder).scenario["client"]["lr"] == 0.02 and not (folder / "battery.csv").exists()
    assert main(run + ["--resume", "--overwrite"]) == 2
    assert "resume and overwrite: give one of them" in capsys.readouterr().err


def test_an_unfinished_run_is_refused_until_resumed(tiny, tmp_path, capsys):
    run_killed_after(tiny, tmp_path, 1)  # round 1's rows written, then SystemExit: closed as crashed
    folder = tmp_path / "tiny" / "0"
    before = _files(folder)
    with pytest.raises(TestbedError, match=r"^.*/tiny/0: holds an unfinished run of this scenario \(crashed\); go on"
                       r" with --resume, or start over with --overwrite$"):
        testbed.run(tiny, out=tmp_path, quiet=True)
    assert _files(folder) == before
    resumed = testbed.run(tiny, out=tmp_path, quiet=True, plots=False, resume=True)
    assert resumed.summary["status"] == "completed" and list(resumed.rounds["round"]) == [1, 2]
    assert not resumed.done_before


def test_python_reads_a_completed_run_back_and_seeds_run_only_the_missing_ones(tiny, tmp_path, capsys):
    first = testbed.run(tiny, out=tmp_path, quiet=True, plots=False)
    before = _files(first.path)
    again = testbed.run(tiny, out=tmp_path, quiet=True)
    assert again.done_before and again.report is None and again.summary == first.summary
    assert _files(first.path) == before
    with pytest.raises(TestbedError, match=r"holds a run of another scenario \(stop\.max_rounds: 2 there, 3 now\)"):
        testbed.run(tiny, set={"stop.max_rounds": 3}, out=tmp_path, quiet=True)
    capsys.readouterr()
    runs = testbed.run(tiny, seeds=[0, 1], out=tmp_path, quiet=True, plots=False)
    assert [(r.path.name, r.done_before) for r in runs] == [("0", True), ("1", False)]
    assert _files(first.path) == before
    assert capsys.readouterr().out.startswith(f"{first.path}: holds this scenario's completed run;")
    # one seed's folder of another scenario refuses them all before any runs
    with pytest.raises(TestbedError, match="holds a run of another scenario"):
        testbed.run(tiny, set={"client.lr": 0.02}, seeds=[2, 1], out=tmp_path, quiet=True)
    assert not (tmp_path / "tiny" / "2").exists()


def test_resume_without_a_checkpoint_goes_on_only_with_the_same_scenario(tiny, tmp_path, capsys):
    run = testbed.run(tiny, out=tmp_path, quiet=True, plots=False)
    (run.path / "checkpoint.pt").unlink()  # a run killed before its first checkpoint has none
    before = _files(run.path)
    with pytest.raises(TestbedError, match=r"holds a run of another scenario \(client\.lr: 0\.01 there, 0\.02 now\)"):
        testbed.run(tiny, set={"client.lr": 0.02}, out=tmp_path, quiet=True, resume=True)
    assert _files(run.path) == before
    again = testbed.run(tiny, out=tmp_path, quiet=True, plots=False, resume=True)  # from round 1, as before
    assert again.summary == run.summary and again.rounds.equals(run.rounds) and not again.done_before
