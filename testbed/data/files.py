"""What every on-disk loader needs: folders and files that must exist, pixel normalisation, label checks.

Errors are one line that starts with the path and says what was expected there.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch


def require_folder(root: str | Path, expected: str, subfolder: str | None = None) -> Path:
    """`root` as a Path (FileNotFoundError naming it if it is not a folder); `root/subfolder` instead where
    that folder exists, so `root` may be the folder that holds the dataset's files or the one above it."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder; expected {expected}")
    return root / subfolder if subfolder and (root / subfolder).is_dir() else root


def require_file(path: Path, expected: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file; expected {expected}")
    return path


def normalise(pixels: np.ndarray, mean, std) -> torch.Tensor:
    """uint8 pixels (N, C, H, W) -> float32 (pixels / 255 - mean) / std, with a mean and std per channel
    (or one for all channels)."""
    x = pixels.astype(np.float32)
    x /= 255
    x -= np.asarray(mean, dtype=np.float32).reshape(1, -1, 1, 1)
    x /= np.asarray(std, dtype=np.float32).reshape(1, -1, 1, 1)
    return torch.from_numpy(x)


def check_labels(path: Path, labels: np.ndarray, n_samples: int, num_classes: int,
                 what: str = "samples") -> torch.Tensor:
    """Labels as an int64 tensor, after checking there is one per sample and each is a class index."""
    labels = np.asarray(labels).reshape(-1)
    if len(labels) != n_samples:
        raise ValueError(f"{path}: {len(labels)} labels for {n_samples} {what}; expected one label per sample")
    integral = np.issubdtype(labels.dtype, np.integer) or (
        np.issubdtype(labels.dtype, np.floating) and bool(np.all(labels == np.round(labels))))
    if not integral:
        raise ValueError(f"{path}: labels of type {labels.dtype}; expected integer class indices")
    labels = labels.astype(np.int64)
    bad = labels[(labels < 0) | (labels >= num_classes)]
    if len(bad):
        raise ValueError(f"{path}: label {bad[0]} outside 0..{num_classes - 1}; expected {num_classes} classes")
    return torch.from_numpy(labels)
