"""Each device's data: its training samples, and the held-out sets of personalized evaluation.

A device's validation and local test sets are carved from its own samples (`data.client_split`). For a
dataset with natural clients and their own test data (Shakespeare, LEAF, synthetic) under the natural
partition, a device's local test set is its client's test data unless a test fraction is given. The local
test sets of all devices are held concatenated with the owner of each sample, so one pass of the model
scores every device.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from testbed.data.dataset import Dataset
from testbed.data.partition import split_clients


@dataclass(frozen=True)
class ClientData:
    train: list[np.ndarray]          # indices into dataset.train_x, per device
    validation: list[np.ndarray]     # indices into dataset.train_x, per device
    local_test_x: torch.Tensor | None = None
    local_test_y: torch.Tensor | None = None
    local_test_owner: np.ndarray | None = None   # the device of each local test sample

    @property
    def num_samples(self) -> np.ndarray:
        return np.fromiter(map(len, self.train), np.int64, len(self.train))

    def local_test_sizes(self) -> np.ndarray:
        if self.local_test_owner is None:
            return np.zeros(len(self.train), dtype=np.int64)
        return np.bincount(self.local_test_owner, minlength=len(self.train))


def assign(dataset: Dataset, parts: list[np.ndarray], rng: np.random.Generator, validation_fraction: float,
           test_fraction: float, natural: bool) -> ClientData:
    train, validation, test = split_clients(parts, rng, validation_fraction, test_fraction)
    if test_fraction > 0:
        x, y, per_device = dataset.train_x, dataset.train_y, test
    elif natural and dataset.test_clients is not None:
        owners = [dataset.train_clients[p[0]] for p in parts]  # a natural part holds one client's samples
        x, y = dataset.test_x, dataset.test_y
        per_device = [np.flatnonzero(dataset.test_clients == owner) for owner in owners]
    else:
        return ClientData(train, validation)
    index = torch.from_numpy(np.concatenate(per_device))
    owner = np.repeat(np.arange(len(parts)), [len(p) for p in per_device])
    return ClientData(train, validation, x[index], y[index], owner)
