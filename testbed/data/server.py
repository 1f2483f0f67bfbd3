"""A small labelled dataset held by the server, disjoint from every device's data (FedDUMAP, Data-sharing,
Hybrid-FL: specs/feddumap.md §7).

The paper takes device data and server data from disjoint parts of the training set, the server's n0 = p times
the device data, drawn from a few classes in equal counts (5 of 10 by default, non-IID degree 0.31 bits). We
carve it from the bundled training pool before the devices are partitioned: `carve` returns the server's
indices and what is left for the devices.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from testbed.data.partition import js_divergence, non_iid_degree


def carve(labels: np.ndarray, num_classes: int, fraction: float, classes: int,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(server indices, device pool indices), both sorted: n0 = round(fraction * n_devices) samples in equal
    counts (the first n0 mod classes classes get one more) from `classes` classes drawn with `rng`, so that
    n0 / (len(labels) - n0) is `fraction`."""
    if classes > num_classes:
        raise ValueError(f"classes: {classes} is more than the dataset's {num_classes} classes; lower it")
    n0 = round(fraction * len(labels) / (1 + fraction))
    chosen = np.sort(rng.choice(num_classes, size=classes, replace=False))
    counts = np.full(classes, n0 // classes) + (np.arange(classes) < n0 % classes)
    taken = []
    for cls, count in zip(chosen, counts):
        members = np.flatnonzero(labels == cls)
        if len(members) < count:
            raise ValueError(f"fraction: class {cls} has {len(members)} samples, the server needs {count}; "
                             "lower fraction or raise classes")
        taken.append(rng.choice(members, size=count, replace=False))
    server = np.sort(np.concatenate(taken)) if taken else np.zeros(0, dtype=np.int64)
    return server, np.setdiff1d(np.arange(len(labels)), server)


def share_with_devices(parts: list[np.ndarray], server: np.ndarray, count: int,
                       rng: np.random.Generator) -> list[np.ndarray]:
    """Data-sharing (Zhao et al. 2018): each device's indices plus `count` server samples drawn for it."""
    count = min(count, len(server))
    return [np.sort(np.concatenate([p, rng.choice(server, size=count, replace=False)])) for p in parts]


@dataclass(frozen=True)
class SharedData:
    """What the server holds: its samples, their label counts, and every device's label counts (the P_k and n_k
    that FedDUMAP's devices send once before training), and the seed of its own minibatch streams. It also
    reaches the devices' training data (`device_data`), for the one estimate FedAP's devices make on their own
    data (their Hessian's pruning rate), which the testbed computes on the server's clock."""

    x: torch.Tensor
    y: torch.Tensor
    histogram: np.ndarray           # (classes,) label counts of D0
    device_histograms: np.ndarray   # (devices, classes) label counts of each device's training data
    seed: int
    train_x: torch.Tensor | None = None      # the training set the devices' indices point into
    train_y: torch.Tensor | None = None
    device_indices: tuple[np.ndarray, ...] = ()

    @property
    def size(self) -> int:
        return len(self.y)

    @property
    def non_iid_degree(self) -> float:
        """D(P0): JS divergence (bits) of the server's labels to all device data's."""
        return js_divergence(self.histogram, self.device_histograms.sum(axis=0))

    def device_degrees(self) -> np.ndarray:
        """D(P_k) of every device (bits), against all device data."""
        return non_iid_degree(self.device_histograms)[0]

    def device_data(self, device: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The first `count` training samples of a device."""
        index = torch.from_numpy(self.device_indices[device][:count])
        return self.train_x[index], self.train_y[index]

    def rng(self, *key: int) -> np.random.Generator:
        """The server's own stream for one purpose and round: the same whatever the executor."""
        return np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=key))
