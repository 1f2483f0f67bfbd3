import gzip

import numpy as np
import pytest
import torch
from ondisk_files import check_dataset, one_line_error, write_idx, write_idx_pair

from testbed.data.idx import load_emnist, load_fashion_mnist, load_mnist


def digits(n: int, bright: dict[tuple[int, int, int], int]) -> np.ndarray:
    """(n, 28, 28) uint8 images, zero but for bright[(image, row, col)]."""
    images = np.zeros((n, 28, 28), dtype=np.uint8)
    for (i, r, c), value in bright.items():
        images[i, r, c] = value
    return images


def z(pixel: int, mean: float, std: float) -> float:
    return (pixel / 255 - mean) / std


@pytest.fixture
def mnist_dir(tmp_path):
    """Train: 3 images, labels 7, 0, 9, plain; test: 2 images, labels 3, 1, gzipped."""
    write_idx_pair(tmp_path, "train", digits(3, {(0, 5, 7): 255, (2, 27, 0): 51}), [7, 0, 9])
    write_idx_pair(tmp_path, "t10k", digits(2, {(1, 14, 14): 255}), [3, 1], gz=True)
    return tmp_path


@pytest.mark.parametrize("load, name, mean, std", [
    (load_mnist, "mnist", 0.1307, 0.3081),
    (load_fashion_mnist, "fashion_mnist", 0.2860, 0.3530),
])
def test_mnist_and_fashion_plain_and_gzipped(mnist_dir, load, name, mean, std):
    d = load(mnist_dir)
    check_dataset(d, name, 10, (3, 1, 28, 28), (2, 1, 28, 28), [7, 0, 9], [3, 1])
    assert d.train_x[0, 0, 5, 7].item() == pytest.approx(z(255, mean, std), rel=1e-6)
    assert d.train_x[2, 0, 27, 0].item() == pytest.approx(z(51, mean, std), rel=1e-6)
    assert d.train_x[0, 0, 7, 5].item() == pytest.approx(z(0, mean, std), rel=1e-6)
    assert d.test_x[1, 0, 14, 14].item() == pytest.approx(z(255, mean, std), rel=1e-6)
    assert torch.allclose(d.test_x[0], torch.tensor(z(0, mean, std)))
    assert d.train_clients is None and d.test_clients is None


def test_plain_file_is_read_when_a_name_ends_in_gz_but_is_not_gzipped(tmp_path):
    write_idx_pair(tmp_path, "train", digits(1, {}), [4])
    write_idx_pair(tmp_path, "t10k", digits(1, {}), [5])
    (tmp_path / "t10k-labels-idx1-ubyte").rename(tmp_path / "t10k-labels-idx1-ubyte.gz")
    assert load_mnist(tmp_path).test_y.tolist() == [5]


def test_emnist_images_are_transposed_back(tmp_path):
    # EMNIST stores each image transposed: a stroke stored at (row 2, col 9) is at (row 9, col 2) upright.
    stored = digits(2, {(0, 2, 9): 255, (1, 20, 3): 255})
    write_idx_pair(tmp_path, "emnist-balanced-train", stored, [46, 0], gz=True)
    write_idx_pair(tmp_path, "emnist-balanced-test", stored[:1], [12])
    d = load_emnist(tmp_path)
    high, low = z(255, 0.1751, 0.3332), z(0, 0.1751, 0.3332)
    check_dataset(d, "emnist_balanced", 47, (2, 1, 28, 28), (1, 1, 28, 28), [46, 0], [12])
    assert d.train_x[0, 0, 9, 2].item() == pytest.approx(high, rel=1e-6)
    assert d.train_x[0, 0, 2, 9].item() == pytest.approx(low, rel=1e-6)
    assert d.train_x[1, 0, 3, 20].item() == pytest.approx(high, rel=1e-6)


def test_emnist_letters_labels_shift_to_zero(tmp_path):
    write_idx_pair(tmp_path, "emnist-letters-train", digits(3, {}), [1, 26, 13])
    write_idx_pair(tmp_path, "emnist-letters-test", digits(1, {}), [2])
    d = load_emnist(tmp_path, split="letters")
    assert d.num_classes == 26 and d.train_y.tolist() == [0, 25, 12] and d.test_y.tolist() == [1]


@pytest.mark.parametrize("split, classes", [("byclass", 62), ("bymerge", 47), ("digits", 10), ("mnist", 10)])
def test_emnist_classes_per_split(tmp_path, split, classes):
    write_idx_pair(tmp_path, f"emnist-{split}-train", digits(2, {}), [0, classes - 1])
    write_idx_pair(tmp_path, f"emnist-{split}-test", digits(1, {}), [classes - 1])
    assert load_emnist(tmp_path, split=split).num_classes == classes


def test_emnist_label_outside_the_split_is_an_error(tmp_path):
    write_idx_pair(tmp_path, "emnist-letters-train", digits(2, {}), [0, 1])  # letters are 1..26: 0 is wrong
    write_idx_pair(tmp_path, "emnist-letters-test", digits(1, {}), [2])
    path = tmp_path / "emnist-letters-train-labels-idx1-ubyte"
    assert "outside 0..25" in one_line_error(ValueError, path, load_emnist, tmp_path, split="letters")


def test_emnist_unknown_split(tmp_path):
    with pytest.raises(ValueError, match="unknown EMNIST split 'typo'"):
        load_emnist(tmp_path, split="typo")


def test_missing_folder(tmp_path):
    message = one_line_error(FileNotFoundError, tmp_path / "nope", load_mnist, tmp_path / "nope")
    assert "MNIST IDX files" in message


def test_missing_file(mnist_dir):
    (mnist_dir / "t10k-labels-idx1-ubyte.gz").unlink()
    message = one_line_error(FileNotFoundError, mnist_dir, load_mnist, mnist_dir)
    assert "no t10k-labels-idx1-ubyte(.gz) here" in message


def test_wrong_magic(mnist_dir):
    write_idx(mnist_dir / "train-images-idx3-ubyte", digits(3, {}), magic=0x1234)
    message = one_line_error(ValueError, mnist_dir / "train-images-idx3-ubyte", load_mnist, mnist_dir)
    assert "not an IDX image file (magic 0x00001234, expected 0x00000803)" in message


def test_labels_file_in_place_of_images(mnist_dir):
    write_idx(mnist_dir / "train-images-idx3-ubyte", np.array([1, 2, 3]))
    message = one_line_error(ValueError, mnist_dir / "train-images-idx3-ubyte", load_mnist, mnist_dir)
    assert "magic 0x00000801" in message


def test_label_and_image_counts_differ(mnist_dir):
    write_idx(mnist_dir / "train-labels-idx1-ubyte", np.array([7, 0]))
    message = one_line_error(ValueError, mnist_dir / "train-labels-idx1-ubyte", load_mnist, mnist_dir)
    assert "2 labels for 3 images" in message


def test_truncated_file(mnist_dir):
    path = mnist_dir / "train-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-10])
    assert "truncated" in one_line_error(ValueError, path, load_mnist, mnist_dir)


def test_damaged_gzip(mnist_dir):
    path = mnist_dir / "t10k-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(b"x" * 100)[:20])
    assert "damaged gzip" in one_line_error(ValueError, path, load_mnist, mnist_dir)
