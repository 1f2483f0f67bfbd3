from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Dataset:
    """A labelled dataset held in memory as tensors, with a held-out test split.

    Datasets with natural clients (a writer, a speaking role, a user) give each sample's client id in
    `train_clients` / `test_clients`; the `natural` partition uses them. Inputs are float images (N, C, H, W),
    float signal windows (N, C, T) or integer token windows (N, T); labels are class or next-token indices.
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

    def problems(self) -> list[str]:
        """What keeps this dataset from training and scoring, in words a loader's author can act on (none for
        a well-formed one): tensors of the wrong kind, lengths that disagree, labels outside [0, num_classes)."""
        found = []
        for split in ("train", "test"):
            x, y = getattr(self, f"{split}_x"), getattr(self, f"{split}_y")
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
                found.append(f"{split}_x and {split}_y must be torch tensors")
                continue
            if x.dtype not in (torch.float32, torch.int64):
                found.append(f"{split}_x is {x.dtype}; give float32 inputs (images) or int64 token windows")
            if y.dtype != torch.int64 or y.dim() != 1:
                found.append(f"{split}_y is {y.dtype} of shape {tuple(y.shape)}; give one int64 label per sample")
            elif len(x) != len(y) or not len(y):
                found.append(f"{split}_x has {len(x)} samples and {split}_y {len(y)}; give as many, at least one")
            elif y.min() < 0 or y.max() >= self.num_classes:
                found.append(f"{split}_y holds labels outside 0..{self.num_classes - 1} (num_classes)")
            clients = getattr(self, f"{split}_clients")
            if clients is not None and len(clients) != len(y):
                found.append(f"{split}_clients has {len(clients)} entries for {len(y)} samples")
        if not found and self.train_x.shape[1:] != self.test_x.shape[1:]:
            found.append(f"train and test samples differ in shape ({tuple(self.train_x.shape[1:])} and "
                         f"{tuple(self.test_x.shape[1:])})")
        return found
