"""MNIST, Fashion-MNIST and EMNIST read from their IDX files on disk.

IDX (the format of yann.lecun.com/exdb/mnist): a big-endian uint32 magic 0x000008DD (0x08: unsigned bytes,
DD: the number of dimensions), DD big-endian uint32 sizes, then the bytes in row-major order. The files may be
gzipped (a name ending in .gz, or not: gzip is recognised by its first two bytes). Nothing is downloaded.
"""
from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np
import torch

from testbed.data.dataset import Dataset
from testbed.data.files import check_labels, normalise, require_folder

IMAGES_MAGIC, LABELS_MAGIC = 0x00000803, 0x00000801

# Normalisation, (mean, std) of the pixels in [0, 1]:
# MNIST: the values of the PyTorch MNIST example (pytorch/examples, mnist/main.py), as mnist5k uses;
# Fashion-MNIST and EMNIST: the pixel mean and std of the training set (EMNIST's: of the `balanced` split's
# training images), the values commonly quoted for these datasets. One pair serves every EMNIST split.
MNIST_NORM = (0.1307, 0.3081)
FASHION_MNIST_NORM = (0.2860, 0.3530)
EMNIST_NORM = (0.1751, 0.3332)

EMNIST_CLASSES = {"byclass": 62, "bymerge": 47, "balanced": 47, "letters": 26, "digits": 10, "mnist": 10}
_IDX_FILES = ("{}-images-idx3-ubyte", "{}-labels-idx1-ubyte")


def find_file(folder: Path, name: str, expected: str) -> Path:
    """`folder/name`, or `folder/name.gz` if only that exists."""
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{folder}: no {name}(.gz) here; expected {expected}")


def read_idx(path: Path, magic: int) -> np.ndarray:
    """The uint8 array of an IDX file (gzipped or not) whose magic must be `magic`."""
    kind = "image" if magic == IMAGES_MAGIC else "label"
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise ValueError(f"{path}: a damaged gzip file ({err}); expected a gzipped IDX {kind} file") from None
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    found = int.from_bytes(raw[:4], "big") if len(raw) >= 4 else None
    if found != magic:
        got = "too short for a header" if found is None else f"magic 0x{found:08x}"
        raise ValueError(f"{path}: not an IDX {kind} file ({got}, expected 0x{magic:08x})")
    if len(raw) < header:
        raise ValueError(f"{path}: IDX header cut short ({len(raw)} bytes, expected {header})")
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    if len(raw) - header != int(np.prod(dims)):
        raise ValueError(f"{path}: {len(raw) - header} data bytes, but the header's sizes "
                         f"{'x'.join(map(str, dims))} need {int(np.prod(dims))}; the file is truncated or damaged")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def _read_split(folder: Path, stem: str, expected: str, num_classes: int, norm: tuple[float, float],
                transpose: bool, label_offset: int) -> tuple[torch.Tensor, torch.Tensor]:
    images_path, labels_path = (find_file(folder, f.format(stem), expected) for f in _IDX_FILES)
    images = read_idx(images_path, IMAGES_MAGIC)
    labels = read_idx(labels_path, LABELS_MAGIC).astype(np.int64) - label_offset
    if transpose:
        images = images.transpose(0, 2, 1)
    y = check_labels(labels_path, labels, len(images), num_classes, what=f"images in {images_path.name}")
    return normalise(images[:, None], *norm), y


def _load_idx(name: str, root: str | Path, stems: tuple[str, str], expected: str, num_classes: int,
              norm: tuple[float, float], transpose: bool = False, label_offset: int = 0) -> Dataset:
    folder = require_folder(root, expected)
    train_x, train_y = _read_split(folder, stems[0], expected, num_classes, norm, transpose, label_offset)
    test_x, test_y = _read_split(folder, stems[1], expected, num_classes, norm, transpose, label_offset)
    return Dataset(name, train_x, train_y, test_x, test_y, num_classes=num_classes)


def load_mnist(root: str | Path) -> Dataset:
    """MNIST (60,000 training, 10,000 test digits) from the four IDX files in `root`: float32 (N, 1, 28, 28)."""
    return _load_idx("mnist", root, ("train", "t10k"), "the four MNIST IDX files (train-images-idx3-ubyte, "
                     "train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, .gz or not)",
                     10, MNIST_NORM)


def load_fashion_mnist(root: str | Path) -> Dataset:
    """Fashion-MNIST (60,000 / 10,000 images of 10 kinds of clothing), the same IDX files as MNIST."""
    return _load_idx("fashion_mnist", root, ("train", "t10k"), "the four Fashion-MNIST IDX files "
                     "(train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
                     "t10k-labels-idx1-ubyte, .gz or not)", 10, FASHION_MNIST_NORM)


def load_emnist(root: str | Path, split: str = "balanced") -> Dataset:
    """An EMNIST split from its IDX files in `root` (the gzip/ folder of EMNIST's gzip.zip):
    emnist-{split}-{train,test}-{images-idx3,labels-idx1}-ubyte(.gz). EMNIST stores each image transposed;
    it is transposed back. The `letters` labels 1..26 become 0..25."""
    if split not in EMNIST_CLASSES:
        raise ValueError(f"unknown EMNIST split '{split}'; choose one of: {', '.join(EMNIST_CLASSES)}")
    stems = (f"emnist-{split}-train", f"emnist-{split}-test")
    expected = (f"the four EMNIST {split} IDX files of EMNIST's gzip.zip "
                f"(emnist-{split}-{{train,test}}-{{images-idx3,labels-idx1}}-ubyte, .gz or not)")
    return _load_idx(f"emnist_{split}", root, stems, expected, EMNIST_CLASSES[split], EMNIST_NORM,
                     transpose=True, label_offset=1 if split == "letters" else 0)
