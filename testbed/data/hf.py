"""A dataset of Flower Datasets / the Hugging Face Hub, or one on disk in the formats the Hub serves, read with
datasets.load_dataset: `data: {name: hf, options: {dataset: uoft-cs/cifar10}}`. Needs the hf extra.

Semantics:
- `dataset`: a local path where one exists (`~` the home folder; a .parquet/.csv/.json file: its rows are the
  training split; a folder: what load_dataset infers, parquet files named train-*/test-* or an imagefolder
  train/<label>/x.png), else a Hub name read at `revision` (the schema resolves it: schema/hub.py); text that
  can only be a path (schema/hub.py's looks_like_path) and names nothing is refused as a missing path. Offline
  (HF_HUB_OFFLINE=1) a Hub dataset is read from the Hugging Face cache.
- Splits: the training set is `train_split`, the test set `test_split`. A dataset without that test split is
  refused with its splits listed, unless `test_fraction` is given: then that share of the training split
  (rounded, at least one sample) is held out as the test set, the same samples whatever the scenario's seed (a
  permutation seeded with 0, like mnist5k's fixed test split), so runs of different seeds score on one test set.
- Columns to tensors: hf_columns.py (the label, the inputs, the clients column `clients` for partition_by and
  the natural partition).
- Cached as the bundled datasets are (cache.py), the key holding the revision: new data, a new file.
Errors are one line starting with the dataset.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from testbed.data import hf_columns as columns
from testbed.data.cache import cached
from testbed.data.dataset import Dataset
from testbed.schema.common import FieldError
from testbed.schema.hub import revision_of

INSTALL = 'pip install -e ".[hf]"'
FILE_BUILDERS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json"}
HOLDOUT_SEED = 0


def _revision(arguments: dict) -> str:
    """The cache key's revision: the data's own (a given one is checked against a local path's files)."""
    if not arguments.get("dataset"):
        return ""
    try:
        return revision_of(arguments["dataset"], arguments.get("revision"))
    except FieldError as err:
        raise ValueError(f"{arguments['dataset']}: {err}") from None


@cached("datasets", revision=_revision)
def load_hf(dataset: str | None = None, revision: str | None = None, features: str | list[str] | None = None,
            label: str | None = None, clients: str | None = None, train_split: str = "train",
            test_split: str = "test", test_fraction: float | None = None) -> Dataset:
    """The dataset `dataset` (a Hub name or a local path) at `revision`: float32 inputs, int64 labels and, where
    `clients` names a column, each sample's client."""
    if not dataset:
        raise ValueError("dataset 'hf' needs options.dataset: a Hub name (uoft-cs/cifar10) or a local path")
    if test_fraction is not None and not 0 < test_fraction < 1:
        raise ValueError(f"{dataset}: test_fraction {test_fraction} must be between 0 and 1")
    splits = _read(dataset, revision)
    train, test = _train_and_test(splits, dataset, train_split, test_split, test_fraction)
    label_column = columns.label_column(train, label, dataset)
    skip = {label_column, clients}
    feature_columns = columns.feature_columns(train, features, skip, dataset)
    train_x, test_x = columns.inputs(train, test, feature_columns, dataset)
    train_y, test_y, num_classes = columns.labels(train, test, label_column, dataset)
    train_ids, test_ids = columns.clients(train, test, clients, dataset) if clients else (None, None)
    local = Path(dataset).expanduser()
    name = local.name if local.exists() else dataset
    return Dataset(name, train_x, train_y, test_x, test_y, num_classes, train_ids, test_ids)


def _read(dataset: str, revision: str | None):
    """The DatasetDict load_dataset gives for a local file, a local folder or a Hub name."""
    try:
        import datasets
    except ImportError:
        raise ValueError(f"{dataset}: Hub datasets need the hf extra: {INSTALL}") from None
    from datasets import utils as progress

    path = Path(dataset).expanduser()
    if path.is_file() and path.suffix.lower() not in FILE_BUILDERS:
        raise ValueError(f"{path}: a {path.suffix or 'suffixless'} file; give a {', '.join(FILE_BUILDERS)} file or "
                         "a folder load_dataset reads (parquet files, an imagefolder)")
    quiet = progress.are_progress_bars_disabled()
    progress.disable_progress_bars()   # a run's output is its own progress bar; load_dataset's would garble it
    try:
        if path.is_file():
            return datasets.load_dataset(FILE_BUILDERS[path.suffix.lower()], data_files={"train": str(path)})
        if path.is_dir():
            return datasets.load_dataset(str(path))
        return datasets.load_dataset(dataset, revision=revision)
    except Exception as err:  # noqa: BLE001 - a network, format or name problem, in load_dataset's words
        raise ValueError(f"{dataset}: datasets.load_dataset cannot read it ({type(err).__name__}: "
                         f"{' '.join(str(err).split())})") from None
    finally:
        if not quiet:
            progress.enable_progress_bars()


def _train_and_test(splits, dataset: str, train_split: str, test_split: str, test_fraction: float | None):
    have = ", ".join(splits)
    if train_split not in splits:
        raise ValueError(f"{dataset}: no split '{train_split}' (it has: {have}); name the training split with "
                         "data.options.train_split")
    train = splits[train_split]
    if test_fraction is None:
        if test_split not in splits:
            raise ValueError(f"{dataset}: no split '{test_split}' (it has: {have}); name the test split with "
                             "data.options.test_split, or hold out data.options.test_fraction of the training split")
        return train, splits[test_split]
    held = max(1, round(test_fraction * len(train)))
    if held >= len(train):
        raise ValueError(f"{dataset}: test_fraction {test_fraction} of {len(train)} samples leaves no training data")
    order = np.random.default_rng(HOLDOUT_SEED).permutation(len(train))
    return train.select(np.sort(order[held:])), train.select(np.sort(order[:held]))
