"""FEMNIST and Shakespeare in LEAF's JSON layout (github.com/TalwalkarLab/leaf: what its preprocess.sh writes
to data/<dataset>/data/{train,test}/*.json). Nothing is downloaded.

Each JSON file is {"users": [...], "num_samples": [...], "user_data": {user: {"x": [...], "y": [...]}}}; a
split may be spread over several files, which are merged (a user found in several files keeps all its samples).
Users are numbered in sorted name order over train and test together, so a user has one client id in both
splits; samples are grouped by user in that order.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from testbed.data.dataset import Dataset
from testbed.data.files import check_labels, require_folder
from testbed.data.text import VOCAB_SIZE, encode

FEMNIST_CLASSES = 62  # 10 digits, 26 upper-case and 26 lower-case letters
SEQ_LEN = 80  # LEAF's Shakespeare windows: 80 characters, then the next one
LAYOUT = 'LEAF\'s {"users", "num_samples", "user_data": {user: {"x": [...], "y": [...]}}}'

# (file, user, x, y) -> (inputs, labels) of one user, checked
Parser = Callable[[Path, str, list, list], tuple[np.ndarray, np.ndarray]]


def _read_split(folder: Path, expected: str, parse: Parser) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """user -> its (inputs, labels) pieces, over every .json file of `folder`, read one file at a time."""
    require_folder(folder, expected)
    files = sorted(folder.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"{folder}: no .json files here; expected {expected}")
    users: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
            raise ValueError(f"{path}: not valid JSON ({err}); expected {LAYOUT}") from None
        user_data = data.get("user_data") if isinstance(data, dict) else None
        if not isinstance(user_data, dict):
            raise ValueError(f"{path}: no \"user_data\" object; expected {LAYOUT}")
        for user, samples in user_data.items():
            x, y = (samples.get(k) if isinstance(samples, dict) else None for k in ("x", "y"))
            if not isinstance(x, list) or not isinstance(y, list):
                raise ValueError(f"{path}: user {user!r} has no \"x\" and \"y\" lists; expected {LAYOUT}")
            if len(x) != len(y):
                raise ValueError(f"{path}: user {user!r} has {len(x)} x but {len(y)} y; expected one y per x")
            users.setdefault(user, []).append(parse(path, user, x, y))
    return users


def _load(name: str, root: str | Path, what: str, parse: Parser, num_classes: int) -> Dataset:
    expected = f"LEAF's {what} JSON files in train/ and test/"
    root = require_folder(root, expected, "data")
    splits = [_read_split(root / part, expected, parse) for part in ("train", "test")]
    client_id = {user: i for i, user in enumerate(sorted(set(splits[0]) | set(splits[1])))}
    tensors = []
    for part, users in zip(("train", "test"), splits):
        pieces = [(client_id[user], x, y) for user in sorted(users) for x, y in users[user]]
        if not sum(len(y) for _, _, y in pieces):
            raise ValueError(f"{root / part}: no samples in its .json files; expected {expected}")
        x = np.concatenate([x for _, x, _ in pieces])
        y = np.concatenate([y for _, _, y in pieces])
        clients = np.concatenate([np.full(len(y), c, dtype=np.int64) for c, _, y in pieces])
        tensors.append((torch.from_numpy(x), torch.from_numpy(y), clients))
    (train_x, train_y, train_clients), (test_x, test_y, test_clients) = tensors
    return Dataset(name, train_x, train_y, test_x, test_y, num_classes=num_classes,
                   train_clients=train_clients, test_clients=test_clients)


def _femnist_user(path: Path, user: str, x: list, y: list) -> tuple[np.ndarray, np.ndarray]:
    try:
        pixels = np.asarray(x, dtype=np.float32).reshape(len(x), -1) if x else np.zeros((0, 784), np.float32)
    except (ValueError, TypeError):  # ragged lists, strings among the pixels
        pixels = None
    if pixels is None or pixels.shape[1:] != (784,) or not np.all((pixels >= 0) & (pixels <= 1)):
        raise ValueError(f"{path}: user {user!r} has an x that is not 784 pixels in [0, 1]; expected FEMNIST's "
                         "28x28 images")
    if not all(type(label) is int for label in y):
        raise ValueError(f"{path}: user {user!r} has a y that is not an integer; expected class indices 0..61")
    labels = check_labels(path, np.array(y, dtype=np.int64), len(x), FEMNIST_CLASSES)
    return pixels.reshape(-1, 1, 28, 28), labels.numpy()


def _shakespeare_user(path: Path, user: str, x: list, y: list) -> tuple[np.ndarray, np.ndarray]:
    if not all(isinstance(s, str) and len(s) == SEQ_LEN for s in x):
        raise ValueError(f"{path}: user {user!r} has an x that is not a {SEQ_LEN}-character string; expected "
                         f"LEAF's Shakespeare windows of {SEQ_LEN} characters")
    if not all(isinstance(c, str) and len(c) == 1 for c in y):
        raise ValueError(f"{path}: user {user!r} has a y that is not one character; expected the character "
                         "that follows each window")
    return encode("".join(x)).reshape(-1, SEQ_LEN), encode("".join(y))


def load_femnist(root: str | Path) -> Dataset:
    """FEMNIST (LEAF's federated EMNIST: 62 classes, one client per writer) from `root/{train,test}/*.json`:
    float32 (N, 1, 28, 28) pixels in [0, 1] as LEAF stores them (1.0 is the white background; not normalised);
    `train_clients` / `test_clients` give each sample's writer."""
    return _load("femnist", root, "FEMNIST", _femnist_user, FEMNIST_CLASSES)


def load_shakespeare_leaf(root: str | Path) -> Dataset:
    """Shakespeare (LEAF's next-character prediction, one client per speaking role) from
    `root/{train,test}/*.json`: int64 token windows (N, 80) in LEAF's 80-character vocabulary
    (testbed.data.text), labels the int64 token that follows; `train_clients` / `test_clients` give each
    sample's role."""
    return _load("shakespeare_leaf", root, "Shakespeare", _shakespeare_user, VOCAB_SIZE)
