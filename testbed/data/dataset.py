from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Dataset:
    """A labelled dataset held in memory as tensors, with a held-out test split.

    Datasets with natural clients (a writer, a speaking role, a user) give each sample's client id in
    `train_clients` / `test_clients`; the `natural` partition uses them. Inputs are float images (N, C, H, W)
    or integer token windows (N, T); labels are class or next-token indices.
    """

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    train_clients: np.ndarray | None = None
    test_clients: np.ndarray | None = None

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(self.train_x.shape[1:])
