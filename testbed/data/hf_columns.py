"""A Hugging Face dataset's columns as the testbed's tensors: which column holds the inputs and which the labels,
and how each becomes float32 inputs, int64 labels and int client ids.

Semantics:
- The label column is the one named (options.label), else the first of LABEL_NAMES the training split has, else
  its one ClassLabel column. A ClassLabel's classes are its names (num_classes = their count); integers are
  class indices (num_classes = the largest in train and test + 1); strings are classes numbered in sorted order
  over train and test together.
- The input columns are the one(s) named (options.features), else the first of FEATURE_NAMES there is, else the
  first image column, else every numeric column but the label and the clients (a table: one feature a column).
  A column of {bytes, path} structs (a parquet file written without the datasets metadata) is read as images.
- Images become (N, C, H, W) float32: pixels / 255, then per channel minus the mean and divided by the std of the
  training split's pixels (population std; a constant channel is divided by 1). All grayscale ('L', '1', 'I',
  'F'): one channel; otherwise every image is converted to RGB: three. Images of different sizes are refused.
- Numeric columns: float32 as they are, a column of arrays (N, ...) or scalar columns side by side (N, F).
- The clients column (options.clients: writer_id...) becomes ints numbered in sorted order over train and test
  together, so a writer has one id in both.
Refusals are ValueErrors in one line that starts with the dataset and names the column and the option to set.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from testbed.data.files import normalise

LABEL_NAMES = ("label", "labels", "fine_label", "character", "target", "class", "y", "coarse_label", "category")
FEATURE_NAMES = ("image", "img", "pixel_values", "images", "features", "x")
GRAYSCALE = {"L", "1", "I", "I;16", "F"}


def label_column(split, given: str | None, where: str) -> str:
    import datasets

    if given is not None:
        return _present(split, given, where, "label")
    named = next((c for c in LABEL_NAMES if c in split.column_names), None)
    classes = [c for c, f in split.features.items() if isinstance(f, datasets.ClassLabel)]
    if named is None and len(classes) != 1:
        raise ValueError(f"{where}: no label column found among {', '.join(split.column_names)}; name it with "
                         "data.options.label")
    return named or classes[0]


def feature_columns(split, given: str | list[str] | None, skip: set[str], where: str) -> list[str]:
    import datasets

    if given is not None:
        return [_present(split, c, where, "features") for c in ([given] if isinstance(given, str) else given)]
    named = next((c for c in FEATURE_NAMES if c in split.column_names), None)
    if named is not None:
        return [named]
    images = [c for c, f in split.features.items() if isinstance(f, datasets.Image)]
    if images:
        return images[:1]
    numeric = [c for c, f in split.features.items() if c not in skip and _numeric(f)]
    if not numeric:
        raise ValueError(f"{where}: no input column found among {', '.join(split.column_names)}; name it with "
                         "data.options.features")
    return numeric


def inputs(train, test, columns: list[str], where: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The training and test inputs, float32: images normalised, numbers as they are."""
    import datasets

    if len(columns) == 1 and _image_bytes(train.features[columns[0]]):   # parquet written without the Hub's metadata
        train, test = (split.cast_column(columns[0], datasets.Image()) for split in (train, test))
    if len(columns) == 1 and isinstance(train.features[columns[0]], datasets.Image):
        return _images(list(train[columns[0]]), list(test[columns[0]]), columns[0], where)
    for column in columns:
        if not _numeric(train.features[column]):
            raise ValueError(f"{where}: column '{column}' holds {train.features[column]}, neither images nor "
                             "numbers; name an image or numeric column with data.options.features")
    return _numbers(train, columns, where), _numbers(test, columns, where)


def labels(train, test, column: str, where: str) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The labels as class indices, and the number of classes."""
    import datasets

    feature = train.features[column]
    y_train, y_test = np.asarray(list(train[column])), np.asarray(list(test[column]))
    if isinstance(feature, datasets.ClassLabel):
        num_classes = feature.num_classes
    elif y_train.dtype.kind in "US" or y_train.dtype == object:
        names = np.unique(np.concatenate([y_train, y_test]).astype(str))
        y_train, y_test = (np.searchsorted(names, y.astype(str)) for y in (y_train, y_test))
        num_classes = len(names)
    elif y_train.dtype.kind in "iub" or (y_train.dtype.kind == "f" and np.all(y_train == np.round(y_train))):
        both = np.concatenate([y_train, y_test]).astype(np.int64)
        if both.min() < 0:
            raise ValueError(f"{where}: label column '{column}' holds {both.min()}; expected class indices from 0")
        num_classes = int(both.max()) + 1
    else:
        raise ValueError(f"{where}: label column '{column}' holds {y_train.dtype} values, not classes; name the "
                         "label column with data.options.label")
    return (torch.from_numpy(np.asarray(y_train, dtype=np.int64)), torch.from_numpy(np.asarray(y_test, dtype=np.int64)),
            num_classes)


def clients(train, test, column: str, where: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Each sample's client as an int, numbered in sorted order of the column's values over both splits (the test
    split's ids are None where it has no such column)."""
    _present(train, column, where, "clients")
    values = [np.asarray(list(split[column])) for split in (train, test) if column in split.column_names]
    ids = np.unique(np.concatenate(values), return_inverse=True)[1].astype(np.int64)
    return ids[:len(train)], (ids[len(train):] if len(values) == 2 else None)


def _present(split, column: str, where: str, option: str) -> str:
    if column not in split.column_names:
        raise ValueError(f"{where}: no column '{column}' (data.options.{option}); it has: "
                         f"{', '.join(split.column_names)}")
    return column


def _image_bytes(feature: Any) -> bool:
    """A struct of the encoded image's bytes and path: how an image column reads without the datasets metadata."""
    return isinstance(feature, dict) and set(feature) == {"bytes", "path"}


def _numeric(feature: Any) -> bool:
    import datasets

    if isinstance(feature, datasets.Value):
        return feature.dtype.startswith(("int", "uint", "float", "bool"))
    if isinstance(feature, (datasets.Sequence, datasets.List, datasets.LargeList)):
        return _numeric(feature.feature)
    if isinstance(feature, (datasets.Array2D, datasets.Array3D, datasets.Array4D, datasets.Array5D)):
        return True
    return isinstance(feature, list) and len(feature) == 1 and _numeric(feature[0])


def _numbers(split, columns: list[str], where: str) -> torch.Tensor:
    arrays = []
    for column in columns:
        try:
            arrays.append(np.asarray(split.with_format("numpy")[column], dtype=np.float32))
        except ValueError:
            raise ValueError(f"{where}: column '{column}' holds arrays of different lengths; give it one length "
                             "a sample") from None
    x = arrays[0] if len(arrays) == 1 else np.stack(arrays, axis=1)
    return torch.from_numpy(np.ascontiguousarray(x))


def _images(train: list, test: list, column: str, where: str) -> tuple[torch.Tensor, torch.Tensor]:
    sizes = {image.size for image in train + test}
    if len(sizes) > 1:
        a, b = sorted(sizes)[:2]
        raise ValueError(f"{where}: images of different sizes in column '{column}' ({a[0]}x{a[1]} and "
                         f"{b[0]}x{b[1]} pixels); resize them to one size first")
    mode = "L" if all(image.mode in GRAYSCALE for image in train + test) else "RGB"
    train_px, test_px = (_pixels(images, mode) for images in (train, test))
    mean, std = _channel_moments(train_px)
    return tuple(normalise(px, mean, std) for px in (train_px, test_px))


def _channel_moments(px: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each channel's mean and population std of the pixels / 255, exactly, from a histogram of the 256 values
    (no float copy of a training set of images); a constant channel's std is taken as 1."""
    values = np.arange(256) / 255
    mean, std = np.empty(px.shape[1]), np.empty(px.shape[1])
    for c in range(px.shape[1]):
        counts = np.bincount(px[:, c].ravel(), minlength=256)
        mean[c] = counts @ values / counts.sum()
        std[c] = np.sqrt(counts @ (values - mean[c]) ** 2 / counts.sum())
    std[std == 0] = 1.0
    return mean, std


def _pixels(images: list, mode: str) -> np.ndarray:
    """(N, C, H, W) uint8."""
    px = np.stack([np.asarray(image.convert(mode) if image.mode != mode else image, dtype=np.uint8)
                   for image in images])
    return np.ascontiguousarray(px[:, None] if px.ndim == 3 else px.transpose(0, 3, 1, 2))
