"""CIFAR-10 and CIFAR-100 read from their "python version" pickles on disk (cifar-10-python.tar.gz,
cifar-100-python.tar.gz from www.cs.toronto.edu/~kriz/cifar.html, extracted). Nothing is downloaded.

Each pickle is a dict with bytes keys: b"data", a (N, 3072) uint8 array whose rows hold the red plane, then
the green, then the blue, each 32x32 row-major; and the labels (b"labels"; CIFAR-100: b"fine_labels" and
b"coarse_labels"). The pickles are unpickled, so read only files you trust.
"""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import torch

from testbed.data.dataset import Dataset
from testbed.data.files import check_labels, normalise, require_file, require_folder

# Per-channel (R, G, B) mean and std of the training images' pixels in [0, 1] (the population std, not the
# often-copied 0.2023/0.1994/0.2010, which is a mean of per-image stds).
CIFAR10_NORM = ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
CIFAR100_NORM = ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762))
CIFAR100_LABELS = {"fine": 100, "coarse": 20}


def _read_batch(path: Path, dataset: str, label_key: bytes, num_classes: int,
                expected: str) -> tuple[np.ndarray, torch.Tensor]:
    require_file(path, expected)
    malformed = f"{path}: expected a {dataset} python pickle with b'data' and {label_key!r}"
    try:
        with open(path, "rb") as f:
            batch = pickle.load(f, encoding="bytes")
    except Exception as err:  # an unpickler fails in many ways on a file that is not a pickle
        raise ValueError(f"{malformed} ({type(err).__name__})") from None
    if not isinstance(batch, dict) or b"data" not in batch or label_key not in batch:
        raise ValueError(malformed)
    data = np.asarray(batch[b"data"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise ValueError(f"{malformed}; b'data' is {data.dtype} {data.shape}, expected uint8 (N, 3072)")
    y = check_labels(path, np.asarray(batch[label_key]), len(data), num_classes)
    return data.reshape(-1, 3, 32, 32), y


def _load(name: str, dataset: str, folder: Path, train_files: list[str], test_file: str, label_key: bytes,
          num_classes: int, norm: tuple, expected: str) -> Dataset:
    train = [_read_batch(folder / f, dataset, label_key, num_classes, expected) for f in train_files]
    test_pixels, test_y = _read_batch(folder / test_file, dataset, label_key, num_classes, expected)
    train_pixels = np.concatenate([pixels for pixels, _ in train])
    return Dataset(name, normalise(train_pixels, *norm), torch.cat([y for _, y in train]),
                   normalise(test_pixels, *norm), test_y, num_classes=num_classes)


def load_cifar10(root: str | Path) -> Dataset:
    """CIFAR-10 (50,000 training, 10,000 test images, 10 classes) from `root/cifar-10-batches-py/` or from
    `root` if it is that folder: data_batch_1..5 and test_batch. float32 (N, 3, 32, 32)."""
    expected = "CIFAR-10's python version (cifar-10-batches-py/: data_batch_1..5 and test_batch)"
    folder = require_folder(root, expected, "cifar-10-batches-py")
    return _load("cifar10", "CIFAR-10", folder, [f"data_batch_{i}" for i in range(1, 6)], "test_batch",
                 b"labels", 10, CIFAR10_NORM, expected)


def load_cifar100(root: str | Path, labels: str = "fine") -> Dataset:
    """CIFAR-100 (50,000 / 10,000 images) from `root/cifar-100-python/` or from `root` if it is that folder:
    train and test, labelled by the 100 fine classes (labels="fine") or the 20 superclasses ("coarse")."""
    if labels not in CIFAR100_LABELS:
        raise ValueError(f"unknown CIFAR-100 labels '{labels}'; choose one of: fine, coarse")
    expected = "CIFAR-100's python version (cifar-100-python/: train and test)"
    folder = require_folder(root, expected, "cifar-100-python")
    name = "cifar100" if labels == "fine" else "cifar100_coarse"
    return _load(name, "CIFAR-100", folder, ["train"], "test", f"{labels}_labels".encode(),
                 CIFAR100_LABELS[labels], CIFAR100_NORM, expected)
