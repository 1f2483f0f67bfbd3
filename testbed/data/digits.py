"""Digits: scikit-learn's 1,797 8x8 handwritten digits (UCI optdigits test set), shipped inside scikit-learn,
so nothing is downloaded.

Pixels (0..16) are scaled to [0, 1], then normalised with the training split's mean and standard deviation
(about 0.305 and 0.376), as float32 images (N, 1, 8, 8).

The test split is fixed, whatever the seed, and stratified: within each class, in the order scikit-learn
stores the digits, every fifth digit is a test digit. That gives 355 test digits (34 to 36 per class) and
1,442 training digits, so runs with different seeds are scored on the same images.
"""
from __future__ import annotations

import numpy as np
import torch

from testbed.data.cache import cached
from testbed.data.dataset import Dataset

TEST_EVERY = 5
NUM_CLASSES = 10
PIXEL_MAX = 16.0


def test_mask(labels: np.ndarray, every: int = TEST_EVERY) -> np.ndarray:
    """True for every `every`-th sample of each class (the (every-1)-th, (2*every-1)-th, ... in order)."""
    rank = np.empty(len(labels), dtype=np.int64)
    for cls in np.unique(labels):
        members = np.flatnonzero(labels == cls)
        rank[members] = np.arange(len(members))
    return rank % every == every - 1


@cached("scikit-learn")
def load_digits() -> Dataset:
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    pixels = bunch.data.astype(np.float64) / PIXEL_MAX
    labels = bunch.target.astype(np.int64)
    is_test = test_mask(labels)
    mean, std = pixels[~is_test].mean(), pixels[~is_test].std()
    x = torch.from_numpy(((pixels - mean) / std).astype(np.float32)).reshape(-1, 1, 8, 8)
    y = torch.from_numpy(labels)
    mask = torch.from_numpy(is_test)
    return Dataset("digits", x[~mask], y[~mask], x[mask], y[mask], num_classes=NUM_CLASSES)
