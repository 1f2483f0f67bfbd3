"""What made a run (testbed/provenance.py): summary.json's made_with names the checkout's commit, torch's build and
the processor, checked against git and torch themselves; and `testbed compare` says in one line when the runs it
reads differ in any of them or in the thread count (analysis/origins.py)."""
import hashlib
import json
import subprocess
from types import SimpleNamespace

import pytest
import torch
from helpers import ROOT, tiny_blobs, tiny_scenario

import testbed
import testbed.data
from analysis.origins import mixed_origins
from testbed import provenance


@pytest.fixture
def tiny(monkeypatch) -> dict:
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    return tiny_scenario({"name": "fedavg"})


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_made_with_names_the_checkouts_commit_torch_and_the_processor():
    made = provenance.made_with()
    assert made["testbed"] == testbed.__version__ and made["torch"] == torch.__version__
    assert made["commit"] == _git("rev-parse", "HEAD")
    assert made["dirty"] == bool(_git("status", "--porcelain", "--untracked-files=no"))
    assert isinstance(made["processor"], str) and made["processor"]


def test_the_code_digest_is_sha256_over_the_packages_sources_by_hand(monkeypatch, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.py").write_bytes(b"x = 1\n")
    (tmp_path / "sub" / "a.py").write_bytes(b"y = 2\n")
    (tmp_path / "notes.md").write_bytes(b"not code")
    monkeypatch.setattr(provenance, "PACKAGE", tmp_path)
    provenance.source_digest.cache_clear()
    try:
        expected = hashlib.sha256(b"b.py\0x = 1\n\0" + b"sub/a.py\0y = 2\n\0").hexdigest()
        assert provenance.source_digest() == expected
    finally:
        provenance.source_digest.cache_clear()


def test_outside_a_git_checkout_the_commit_is_unknown_not_guessed(monkeypatch, tmp_path):
    monkeypatch.setattr(provenance, "PACKAGE", tmp_path)
    provenance.code_version.cache_clear()
    try:
        assert provenance.code_version() == (None, None)
    finally:
        provenance.code_version.cache_clear()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: its name is the processor")
def test_a_cuda_run_without_a_gpu_says_so():
    assert provenance.made_with("cuda")["processor"] == "cuda (unavailable)"


def test_a_runs_summary_records_made_with(tiny, tmp_path):
    run = testbed.run(tiny, out=tmp_path, quiet=True, plots=False)
    summary = json.loads((run.path / "summary.json").read_text())
    assert summary["made_with"] == provenance.made_with() and summary["torch_threads"] == 1


def _run(processor="AMD EPYC", threads=1, code="c" * 64, recorded=True):
    made = {"code": code, "commit": "a" * 40, "dirty": False, "torch": "2.13.0+cpu", "processor": processor}
    return SimpleNamespace(summary={"torch_threads": threads, **({"made_with": made} if recorded else {})})


def test_runs_made_alike_get_no_note_and_old_runs_alone_none():
    assert mixed_origins([_run(), _run()]) == []
    assert mixed_origins([_run(recorded=False), _run(recorded=False)]) == []


def test_each_aspect_that_differs_gets_its_line_with_counts():
    lines = mixed_origins([_run(), _run(), _run(processor="Intel Xeon", threads=2)])
    assert lines == [
        "note: these runs differ in processor (AMD EPYC: 2, Intel Xeon: 1 runs): trained numbers can differ by that "
        "alone (README, 'Intervals, verdicts, and what depends on the machine')",
        "note: these runs differ in threads (1: 2, 2: 1 runs): trained numbers can differ by that alone (README, "
        "'Intervals, verdicts, and what depends on the machine')"]
    code = mixed_origins([_run(), _run(code="d" * 64)])
    assert len(code) == 1 and "code (cccccccccccc: 1, dddddddddddd: 1 runs)" in code[0]


def test_an_aspect_a_run_did_not_record_is_not_a_version_of_it():
    older = _run()
    del older.summary["made_with"]["code"]
    assert mixed_origins([_run(), older]) == []


def test_runs_that_record_nothing_beside_runs_that_do_are_counted():
    assert mixed_origins([_run(), _run(recorded=False)]) == [
        "note: 1 of these runs do not record what made them (made before summary.json's made_with): they may come "
        "from other code or another machine"]


def test_compare_says_when_its_runs_were_made_on_other_processors(tiny, tmp_path):
    runs = testbed.run(tiny, seeds=[0, 1], out=tmp_path, quiet=True, plots=False)
    alike = testbed.compare([r.path for r in runs], out=tmp_path / "alike")
    assert "note:" not in alike.text
    summary_file = runs[1].path / "summary.json"
    summary = json.loads(summary_file.read_text())
    summary["made_with"]["processor"] = "~another processor"  # sorts after any real name
    summary_file.write_text(json.dumps(summary))
    mixed = testbed.compare([r.path for r in runs], out=tmp_path / "mixed")
    printed = " ".join(mixed.text.split())   # compare wraps its notes to fit a terminal
    assert f"note: these runs differ in processor ({provenance.cpu_name()}: 1, ~another processor: 1 runs)" in printed
