"""A dataset of your own: scikit-learn's breast cancer Wisconsin data (569 real biopsies, 30 features, benign or
malignant; shipped inside scikit-learn, nothing downloaded), as a testbed loader (docs/extending.md).

A loader returns testbed.data.Dataset: float32 inputs, one int64 label per sample, a held-out test split, and
optionally each sample's natural client (train_clients / test_clients) for `partition: {kind: natural}`. Its
keyword arguments are the scenario's `data.options`, checked by name before anything runs.
"""
import numpy as np
import torch
from sklearn.datasets import load_breast_cancer

from testbed.data import Dataset


def breast_cancer(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    x, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(y))
    test, train = order[: round(test_fraction * len(y))], order[round(test_fraction * len(y)):]
    mean, std = x[train].mean(0), x[train].std(0)   # standardised with the training split's statistics
    x = ((x - mean) / std).astype(np.float32)
    return Dataset("breast_cancer", torch.from_numpy(x[train]), torch.from_numpy(y[train]),
                   torch.from_numpy(x[test]), torch.from_numpy(y[test]), num_classes=2)
