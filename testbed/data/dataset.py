from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Dataset:
    """A labelled dataset held in memory as tensors, with a fixed held-out test split."""

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(self.train_x.shape[1:])
