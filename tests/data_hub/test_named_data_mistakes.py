"""A newcomer's data mistakes end in one line that names the real cause and the fix (exit code 2), as tried on a small
parquet dataset over 30 devices: a local dataset path that does not exist is said to be a missing path, with where
relative paths start (the scenario file's folder) and a close name or the path from there, never as a Hub that
cannot be reached; a Dirichlet split that cannot give every device its minimum says which scenario values to change.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT, write_yaml
from hub_files import hub_scenario, write_parquet

from testbed.cli import main
from testbed.data.flower_partition import partition
from testbed.data.partition import shards
from testbed.schema.hub import looks_like_path
from testbed.schema.partitioners import PartitionError

MISSING = "data.options.dataset: no such file or folder:"


def _digits(root, n=600, classes=10):
    """A small tabular dataset as scikit-learn's digits would be saved: train.parquet and test.parquet, four
    feature columns and an integer label, `classes` classes in turn."""
    rng = np.random.default_rng(0)
    for split, size in (("train", n), ("test", 20)):
        columns = {f"f{i}": rng.normal(size=size).astype(np.float32) for i in range(4)}
        write_parquet(root / f"{split}.parquet", {**columns, "label": np.arange(size) % classes})
    return root


def _scenario(folder, dataset, partition=None, **data):
    """30 devices on `dataset`, with the partition section `partition` and other `data` fields where given."""
    raw = hub_scenario(dataset)
    raw["fleet"]["groups"][0]["count"] = 29
    raw["data"].update(data, **({"partition": partition} if partition else {}))
    return write_yaml(folder / "s.yaml", raw)


def _main(capsys, *argv: str) -> int:
    """The command line's exit code, what writing the data said on stderr (a progress bar) left out."""
    capsys.readouterr()
    return main(list(argv))


def _error(capsys) -> str:
    """The one line on stderr, without its 'error: '."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err.removeprefix("error: ").rstrip("\n")


def test_what_only_a_path_can_be_is_a_path():
    for path in ("./digits_pqq", "/data/digits", "~/digits", "data/train.parquet", "d/T.CSV", "x.jsonl/", "a.arrow",
                 "b.txt", "..", "."):
        assert looks_like_path(path), path
    for name in ("uoft-cs/cifar10", "flwrlabs/femnist", "mnist", "owner/data-v1.2"):
        assert not looks_like_path(name), name


@pytest.mark.parametrize("given, says", [
    ("./digits_pqq", "./digits_pqq (paths are relative to the scenario file's folder, {tmp}); did you mean "
                     "./digits_pq?"),
    ("{tmp}/nowhere/digits", "{tmp}/nowhere/digits (there is no folder {tmp}/nowhere); correct the path"),
    ("data/train.parquet", "data/train.parquet (paths are relative to the scenario file's folder, {tmp}; there is no "
                           "folder {tmp}/data); correct the path"),
    ("digits_pq/tain.parquet", "digits_pq/tain.parquet (paths are relative to the scenario file's folder, {tmp}); "
                               "did you mean digits_pq/train.parquet?"),
    ("~/digits", "~/digits (that is {tmp}/home/digits); correct the path"),
])
def test_a_missing_local_path_is_named_with_where_it_was_looked_for(given, says, tmp_path, capsys, monkeypatch):
    tmp = tmp_path.resolve()
    _digits(tmp / "digits_pq")
    (tmp / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp / "home"))
    file = _scenario(tmp, given.format(tmp=tmp))
    assert _main(capsys, "validate", str(file)) == 2
    assert _error(capsys) == f"{file}: {MISSING} {says.format(tmp=tmp)}"


def test_a_path_written_from_the_current_folder_is_given_back_from_the_scenarios(tmp_path, capsys, monkeypatch):
    """The data beside the command, the scenario in a folder below: the path it would have to be."""
    _digits(tmp_path / "digits_pq")
    (tmp_path / "scenarios").mkdir()
    file = _scenario(tmp_path / "scenarios", "digits_pq/train.parquet")
    monkeypatch.chdir(tmp_path)
    assert _main(capsys, "validate", "scenarios/s.yaml") == 2
    assert _error(capsys) == (f"scenarios/s.yaml: {MISSING} digits_pq/train.parquet (paths are relative to the "
                              f"scenario file's folder, {file.parent.resolve()}; there is no folder "
                              f"{file.parent.resolve()}/digits_pq); did you mean ../digits_pq/train.parquet? "
                              "(digits_pq/train.parquet is there from the current folder)")


def test_testbed_run_on_a_missing_folder_ends_in_one_line_and_exit_2(tmp_path):
    """As a user runs it: `python -m testbed run s.yaml` in the scenario's folder, a fresh interpreter."""
    _digits(tmp_path / "digits_pq")
    _scenario(tmp_path, "./digits_pqq")
    done = subprocess.run([sys.executable, "-m", "testbed", "run", "s.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))   # this worktree's testbed
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr == (f"error: s.yaml: {MISSING} ./digits_pqq (paths are relative to the scenario file's folder, "
                           f"{tmp_path.resolve()}); did you mean ./digits_pq?\n")
    assert not (tmp_path / "runs").exists()


def test_a_hub_name_still_reaches_for_the_hub(tmp_path, capsys):
    file = _scenario(tmp_path, "nobody/digits")
    assert _main(capsys, "validate", str(file)) == 2
    assert "data.options.dataset: cannot reach the Hugging Face Hub for 'nobody/digits' (no network?)" in _error(capsys)


FLOWER = {"kind": "flwr", "name": "DirichletPartitioner", "options": {"alpha": 0.05, "partition_by": "label"}}


def test_a_flower_dirichlet_split_that_gives_up_names_the_values_to_change(tmp_path, capsys):
    """Alpha 0.05 over 30 devices and 600 samples: Flower redraws 11 times and gives up, in its words 'the max number
    of attempts (10) was reached'; the run says which options, fields and counts would make it work."""
    file = _scenario(tmp_path, str(_digits(tmp_path / "digits_pq")), FLOWER)
    assert _main(capsys, "run", str(file), "--out", str(tmp_path / "runs"), "--quiet") == 2
    assert _error(capsys) == (f"{file}: data.partition.options: DirichletPartitioner with alpha 0.05 over 30 devices "
                              "(600 training samples) could not give every device at least min_partition_size=10 "
                              "samples in 11 draws; raise alpha, lower min_partition_size (as low as "
                              "data.min_samples_per_client, 1), or use fewer devices")


def test_a_dirichlet_split_no_alpha_can_make_says_so():
    labels = np.arange(600) % 10
    rng = np.random.default_rng(0)
    with pytest.raises(PartitionError, match=r"^DirichletPartitioner cannot give each of 30 devices min_partition_size"
                                             r"=25 of 600 training samples, whatever alpha; lower min_partition_size "
                                             r"or use at most 24 devices$"):
        partition(labels, 30, rng, "DirichletPartitioner", FLOWER["options"] | {"min_partition_size": 25})
    with pytest.raises(PartitionError, match=r"samples in 11 draws; raise alpha, lower min_partition_size and "
                                             r"data.min_samples_per_client, or use fewer devices$"):
        partition(labels, 30, rng, "DirichletPartitioner", FLOWER["options"], min_samples=10)
    with pytest.raises(ValueError, match=r"^600 training samples cannot give 30 devices data.min_samples_per_client="
                                         r"25 samples each; use at most 24 devices or lower "
                                         r"data.min_samples_per_client$"):
        partition(labels, 30, rng, "DirichletPartitioner", FLOWER["options"], min_samples=25)


def test_our_dirichlet_split_that_gives_up_names_the_fields(tmp_path, capsys):
    file = _scenario(tmp_path, str(_digits(tmp_path / "digits_pq")), {"kind": "dirichlet", "alpha": 0.05},
                     min_samples_per_client=10)
    assert _main(capsys, "run", str(file), "--out", str(tmp_path / "runs"), "--quiet") == 2
    assert _error(capsys) == (f"{file}: data.partition: a Dirichlet split with alpha 0.05 over 30 devices (600 "
                              "training samples) could not give every device at least data.min_samples_per_client=10 "
                              "samples in 1000 draws; raise data.partition.alpha, lower data.min_samples_per_client, "
                              "or use fewer devices")
    with pytest.raises(ValueError, match=r"^600 training samples cannot give 300 shards \(30 devices x data.partition"
                                         r".classes_per_client=10\) data.min_samples_per_client=3 samples each; use "
                                         r"fewer devices, lower data.partition.classes_per_client, or lower data"):
        shards(np.arange(600) % 10, 30, np.random.default_rng(0), classes_per_client=10, min_samples=3)
