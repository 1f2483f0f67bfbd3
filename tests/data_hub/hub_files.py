"""Tiny datasets on disk in the formats the Hugging Face Hub serves (parquet with PNG-bytes images, an imagefolder,
a tabular parquet, FEMNIST's columns), for the hf loader's tests, which read them through the loader's one code
path (datasets.load_dataset); and a scenario on them."""
from __future__ import annotations

import copy
import io
from pathlib import Path

import numpy as np
from helpers import TWO_DEVICES
from PIL import Image


def png(pixels, mode: str | None = None) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(pixels, dtype=np.uint8), mode).save(buffer, format="PNG")
    return buffer.getvalue()


def write_parquet(path: Path, columns: dict, features: dict | None = None) -> Path:
    """One parquet file written by datasets (its features kept in the file's metadata, as the Hub's are)."""
    import datasets

    path.parent.mkdir(parents=True, exist_ok=True)
    spec = datasets.Features(features) if features else None
    datasets.Dataset.from_dict(columns, features=spec).to_parquet(str(path))
    return path


def images(*pixel_arrays) -> list[dict]:
    return [{"bytes": png(p), "path": None} for p in pixel_arrays]


def image_parquet_folder(root: Path, names=("cat", "dog", "emu")) -> Path:
    """train-00000-of-00001.parquet: two 2x2 grayscale images ([[0, 255], [255, 0]] labelled 0 and all-255
    labelled 2); test-...: one all-0 image labelled 1. The label a ClassLabel of three names."""
    import datasets

    features = {"image": datasets.Image(), "label": datasets.ClassLabel(names=list(names))}
    write_parquet(root / "train-00000-of-00001.parquet",
                  {"image": images([[0, 255], [255, 0]], np.full((2, 2), 255)), "label": [0, 2]}, features)
    write_parquet(root / "test-00000-of-00001.parquet", {"image": images(np.zeros((2, 2))), "label": [1]}, features)
    return root


def image_folder(root: Path) -> Path:
    """An imagefolder: train/<label>/*.png (RGB 2x2), test/<label>/*.png; labels 'ant' and 'bee'."""
    for split, label, name, colour in [("train", "ant", "a", (255, 0, 0)), ("train", "bee", "b", (0, 255, 0)),
                                       ("train", "bee", "c", (0, 0, 255)), ("test", "ant", "d", (255, 255, 255))]:
        folder = root / split / label
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.png").write_bytes(png(np.tile(np.array(colour, dtype=np.uint8), (2, 2, 1))))
    return root


def femnist_like(root: Path, writers_per_split=(("w3", "w1", "w2", "w1", "w3", "w3"), ("w1", "w3"))) -> Path:
    """FEMNIST's columns (image, writer_id, character as strings): train and test splits, 2x2 images."""
    for split, writers in zip(("train", "test"), writers_per_split):
        n = len(writers)
        write_parquet(root / f"{split}-00000-of-00001.parquet",
                      {"image": images(*[np.full((2, 2), 40 * i) for i in range(n)]), "writer_id": list(writers),
                       "character": ["b", "a", "c", "a", "b", "c"][:n]})
    return root


def hub_scenario(dataset: str | Path, **options) -> dict:
    """TWO_DEVICES on an hf dataset with the mlp, which takes any input shape."""
    raw = copy.deepcopy(TWO_DEVICES)
    raw["data"] = {"name": "hf", "options": {"dataset": str(dataset), **options}}
    raw["model"] = {"name": "mlp"}
    raw["client"] = {"lr": 0.05, "batch_size": 2, "local_steps": 1}
    return raw
