"""The parsed-dataset cache: built on the first load, read on the second, rebuilt when damaged or outdated."""
import importlib.metadata

import numpy as np
import pytest
import torch

from testbed.data.cache import cached
from testbed.data.dataset import Dataset
from testbed.data.mnist5k import load_mnist5k
from testbed.data.shakespeare import load_shakespeare

CALLS = []


@cached("numpy")
def load_tiny(classes: int = 3) -> Dataset:
    CALLS.append(classes)
    x = torch.arange(24, dtype=torch.float32).reshape(6, 1, 2, 2)
    return Dataset("tiny", x[:4], torch.tensor([0, 1, 2, 0]), x[4:], torch.tensor([1, 2]), num_classes=classes,
                   train_clients=np.array([0, 0, 1, 1]), test_clients=np.array([0, 1]))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TESTBED_CACHE_DIR", str(tmp_path / "cache"))
    CALLS.clear()
    return tmp_path / "cache"


def _same(a: Dataset, b: Dataset) -> bool:
    return (a.name, a.num_classes) == (b.name, b.num_classes) and all(
        torch.equal(getattr(a, f), getattr(b, f)) for f in ("train_x", "train_y", "test_x", "test_y")) and all(
        np.array_equal(getattr(a, f), getattr(b, f)) for f in ("train_clients", "test_clients"))


def test_first_load_builds_the_file_and_the_second_reads_it(cache):
    first = load_tiny()
    files = list(cache.glob("tiny-*.npz"))
    assert CALLS == [3] and len(files) == 1
    second = load_tiny()
    assert CALLS == [3] and _same(first, second)            # not parsed again
    load_tiny(classes=4)                                     # other arguments, another file
    assert CALLS == [3, 4] and len(list(cache.glob("tiny-*.npz"))) == 2
    assert not list(cache.glob("*.tmp"))


def test_a_new_package_version_builds_a_new_file(cache, monkeypatch):
    load_tiny()
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda p: "999" if p == "numpy" else real(p))
    load_tiny()
    assert CALLS == [3, 3] and len(list(cache.glob("tiny-*.npz"))) == 2


@pytest.mark.parametrize("damage", [lambda b: b[: len(b) // 2], lambda b: b"garbage" * 10, lambda b: b""])
def test_a_damaged_file_is_rebuilt_with_one_warning_line(cache, capsys, damage):
    first = load_tiny()
    (path,) = cache.glob("tiny-*.npz")
    path.write_bytes(damage(path.read_bytes()))
    again = load_tiny()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"warning: the dataset cache file {path} is unreadable")
    assert "Traceback" not in err and CALLS == [3, 3] and _same(first, again)
    assert _same(load_tiny(), first) and CALLS == [3, 3]   # the rebuilt file is read


def test_an_unwritable_cache_folder_costs_only_speed(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TESTBED_CACHE_DIR", str(blocker / "cache"))
    assert load_tiny().num_classes == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write the dataset cache" in err and "TESTBED_CACHE_DIR" in err


@pytest.mark.slow
def test_cached_bundled_datasets_equal_the_parsed_ones(cache):
    assert _same(load_mnist5k(), load_mnist5k.__wrapped__())
    load_mnist5k()
    assert _same(load_mnist5k(), load_mnist5k.__wrapped__())      # read from the file
    shakespeare = load_shakespeare(stride=400)
    assert _same(load_shakespeare(stride=400), shakespeare) and shakespeare.train_clients is not None
