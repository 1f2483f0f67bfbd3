"""Synthetic, learnable CIFAR-10 in CIFAR-10's own on-disk format ("python version": cifar-10-batches-py/ with
data_batch_1..5, test_batch and batches.meta, each a pickle of a dict with bytes keys), so that the testbed's
real loader (testbed/data/cifar.py, `data: {name: cifar10, root: ...}`) reads it. No package ships CIFAR-10,
and nothing may be downloaded; the benchmarks need its shapes and sizes, not its pictures.

Each class has a smooth colour template (random 4x4x3 values upsampled to 32x32); an image is its class's
template, shifted by up to 2 pixels, at a random contrast, plus Gaussian pixel noise, clipped to uint8. The noise
is strong enough that one round does not solve the task and weak enough that a few rounds of resnet20 climb
well above chance (10%).

    python benchmarks/synthetic_cifar.py DIR [--scale 1.0]     # writes DIR/cifar-10-batches-py/
"""
from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path

import numpy as np

FOLDER = "cifar-10-batches-py"
TRAIN, TEST, BATCHES, CLASSES = 50_000, 10_000, 5, 10
LABEL_NAMES = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck"]
# CIFAR-10's own files are protocol 2 from Python 2, where bytes were str; Python 3's protocol 2 stores bytes as
# latin-1 text (1.45x the size, slower to read), so protocol 4, which the loader reads the same way.
PICKLE_PROTOCOL = 4
TEMPLATE_AMPLITUDE, NOISE_STD, MAX_SHIFT = 45.0, 60.0, 2


def templates(rng: np.random.Generator) -> np.ndarray:
    """(10, 3, 32, 32) float32 class patterns around 0, smooth so that convolutions can pick them up."""
    coarse = rng.standard_normal((CLASSES, 3, 4, 4)).astype(np.float32)
    return TEMPLATE_AMPLITUDE * coarse.repeat(8, axis=2).repeat(8, axis=3)


def images(labels: np.ndarray, patterns: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(N, 3072) uint8 rows as CIFAR stores them: the red plane, then green, then blue, each row-major."""
    shifts = rng.integers(-MAX_SHIFT, MAX_SHIFT + 1, size=(len(labels), 2))
    contrast = rng.uniform(0.6, 1.4, size=(len(labels), 1, 1, 1)).astype(np.float32)
    out = np.empty((len(labels), 3, 32, 32), np.float32)
    for i, (label, (dy, dx)) in enumerate(zip(labels, shifts)):
        out[i] = np.roll(patterns[label], (dy, dx), axis=(1, 2))
    out *= contrast
    out += 128.0 + NOISE_STD * rng.standard_normal(out.shape, dtype=np.float32)
    return np.clip(out, 0, 255).astype(np.uint8).reshape(len(labels), -1)


def _dump(path: Path, value: dict) -> None:
    with open(path, "wb") as f:
        pickle.dump(value, f, protocol=PICKLE_PROTOCOL)


def write_synthetic_cifar10(root: str | Path, scale: float = 1.0, seed: int = 0) -> Path:
    """Write root/cifar-10-batches-py/ with round(50,000 x scale) training images in five batches and
    round(10,000 x scale) test images, balanced classes in a random order; returns that folder. A folder already
    written with the same settings (its synthetic.json) is kept as it is, so a benchmark pays for it once."""
    folder = Path(root) / FOLDER
    settings = {"scale": scale, "seed": seed, "amplitude": TEMPLATE_AMPLITUDE, "noise": NOISE_STD,
                "shift": MAX_SHIFT}
    marker = folder / "synthetic.json"
    if marker.exists() and json.loads(marker.read_text()) == settings:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    per_batch = max(CLASSES, round(TRAIN * scale / BATCHES))
    n_test = max(CLASSES, round(TEST * scale))
    rng = np.random.default_rng(seed)
    patterns = templates(rng)

    def batch(n: int, name: str) -> dict:
        labels = rng.permutation(np.arange(n) % CLASSES)
        return {b"batch_label": name.encode(), b"labels": labels.tolist(), b"data": images(labels, patterns, rng),
                b"filenames": [f"synthetic_{name}_{i}.png".encode() for i in range(n)]}

    for b in range(1, BATCHES + 1):
        _dump(folder / f"data_batch_{b}", batch(per_batch, f"training batch {b} of {BATCHES}"))
    _dump(folder / "test_batch", batch(n_test, "testing batch 1 of 1"))
    _dump(folder / "batches.meta", {b"num_cases_per_batch": per_batch, b"label_names": LABEL_NAMES,
                                    b"num_vis": 3 * 32 * 32})
    marker.write_text(json.dumps(settings))  # last: a folder cut short is rewritten next time
    return folder


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(write_synthetic_cifar10(args.root, args.scale, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
