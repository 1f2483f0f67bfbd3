"""SVHN (Street View House Numbers, cropped digits) read from train_32x32.mat and test_32x32.mat on disk
(ufldl.stanford.edu/housenumbers, "Format 2"). Nothing is downloaded; the `extra` set is not read.

Each .mat holds X, uint8 (32, 32, 3, N), and y, (N, 1), where the digit 0 is labelled 10.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from testbed.data.dataset import Dataset
from testbed.data.files import check_labels, normalise, require_file, require_folder

# Per-channel (R, G, B) mean and std of the training images' pixels in [0, 1], the values commonly quoted.
SVHN_NORM = ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970))
EXPECTED = "SVHN's train_32x32.mat and test_32x32.mat"


def _read_mat(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    require_file(path, EXPECTED)
    malformed = f"{path}: expected an SVHN .mat with X, uint8 (32, 32, 3, N), and y, (N, 1) labels 1..10"
    import scipy.io  # here, not at the top: importing it costs every run ~0.15 s

    try:
        mat = scipy.io.loadmat(path)
    except Exception as err:  # scipy raises several kinds of error on a file that is not a .mat
        raise ValueError(f"{malformed} ({type(err).__name__})") from None
    if "X" not in mat or "y" not in mat:
        raise ValueError(malformed)
    images = np.asarray(mat["X"])
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[:3] != (32, 32, 3):
        raise ValueError(f"{malformed}; X is {images.dtype} {images.shape}")
    y = check_labels(path, mat["y"], images.shape[3], 11, what="images in X")  # 0..10 so far
    if (y == 0).any():
        raise ValueError(f"{path}: label 0 in y; expected SVHN's labels 1..10 (10 for the digit 0)")
    y[y == 10] = 0
    return normalise(images.transpose(3, 2, 0, 1), *SVHN_NORM), y


def load_svhn(root: str | Path) -> Dataset:
    """SVHN (73,257 training, 26,032 test digits) from `root/{train,test}_32x32.mat`: float32 (N, 3, 32, 32),
    labels 0..9 (the .mat's 10 is the digit 0)."""
    folder = require_folder(root, EXPECTED)
    train_x, train_y = _read_mat(folder / "train_32x32.mat")
    test_x, test_y = _read_mat(folder / "test_32x32.mat")
    return Dataset("svhn", train_x, train_y, test_x, test_y, num_classes=10)
