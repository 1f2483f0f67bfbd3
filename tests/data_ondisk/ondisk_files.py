"""Tiny dataset files in the real on-disk formats (IDX, CIFAR pickles, SVHN .mat, LEAF JSON), for the loader
tests; and the check that a loader's error is one line naming the path."""
from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch


def write_idx(path: Path, array: np.ndarray, magic: int | None = None) -> Path:
    """An IDX file of uint8 `array` (gzipped if the name ends in .gz); `magic` overrides the real one."""
    array = np.asarray(array, dtype=np.uint8)
    magic = 0x0800 | array.ndim if magic is None else magic
    raw = magic.to_bytes(4, "big") + np.asarray(array.shape, dtype=">u4").tobytes() + array.tobytes()
    path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)
    return path


def write_idx_pair(folder: Path, stem: str, images: np.ndarray, labels, gz: bool = False) -> None:
    """`{stem}-images-idx3-ubyte` and `{stem}-labels-idx1-ubyte` (with .gz if `gz`) in `folder`."""
    ext = ".gz" if gz else ""
    write_idx(folder / f"{stem}-images-idx3-ubyte{ext}", images)
    write_idx(folder / f"{stem}-labels-idx1-ubyte{ext}", np.asarray(labels))


def write_pickle(path: Path, obj) -> Path:
    path.write_bytes(pickle.dumps(obj))
    return path


def cifar_rows(n: int, pixels: dict[tuple[int, int, int, int], int] | None = None) -> np.ndarray:
    """(n, 3072) uint8 CIFAR rows, zero but for pixels[(image, channel, row, col)] (R, G, B planes,
    each 32x32 row-major)."""
    rows = np.zeros((n, 3072), dtype=np.uint8)
    for (i, c, r, col), value in (pixels or {}).items():
        rows[i, c * 1024 + r * 32 + col] = value
    return rows


def write_svhn(path: Path, images_hwcn: np.ndarray, labels) -> Path:
    scipy.io.savemat(path, {"X": np.asarray(images_hwcn, dtype=np.uint8),
                            "y": np.asarray(labels, dtype=np.uint8).reshape(-1, 1)})
    return path


def write_leaf(path: Path, user_data: dict[str, tuple[list, list]]) -> Path:
    """A LEAF JSON file: user -> (x, y)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "users": list(user_data),
        "num_samples": [len(x) for x, _ in user_data.values()],
        "user_data": {u: {"x": x, "y": y} for u, (x, y) in user_data.items()},
    }))
    return path


def check_dataset(d, name: str, num_classes: int, train_shape: tuple, test_shape: tuple, train_y: list,
                  test_y: list, x_dtype: torch.dtype = torch.float32) -> None:
    """The name, classes, input shapes and dtypes and the labels (int64) of a loaded dataset."""
    assert (d.name, d.num_classes) == (name, num_classes)
    assert tuple(d.train_x.shape) == train_shape and tuple(d.test_x.shape) == test_shape
    assert d.train_x.dtype == d.test_x.dtype == x_dtype
    assert d.train_y.dtype == d.test_y.dtype == torch.int64
    assert d.train_y.tolist() == train_y and d.test_y.tolist() == test_y


def one_line_error(kind: type[Exception], path: Path, call, *args, **kwargs) -> str:
    """The message of the `kind` error that call(*args, **kwargs) raises, checked to be one line naming `path`."""
    with pytest.raises(kind) as info:
        call(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path}:"), message
    return message
