import numpy as np
import pytest
from ondisk_files import check_dataset, cifar_rows, one_line_error, write_pickle

from testbed.data.cifar import load_cifar10, load_cifar100

C10_MEAN, C10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
C100_MEAN, C100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)


def z(pixel: int, channel: int, mean, std) -> float:
    return (pixel / 255 - mean[channel]) / std[channel]


@pytest.fixture
def cifar10_dir(tmp_path):
    """cifar-10-batches-py/: five batches of 2 images (labels 2i-2, 2i-1 mod 10), a test batch of 1 image.
    Batch 1, image 0: red 255 at (1, 2), green 255 at (5, 6), blue 102 at (31, 0)."""
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for i in range(1, 6):
        pixels = {(0, 0, 1, 2): 255, (0, 1, 5, 6): 255, (0, 2, 31, 0): 102} if i == 1 else {}
        write_pickle(folder / f"data_batch_{i}", {b"batch_label": b"x", b"data": cifar_rows(2, pixels),
                                                  b"labels": [(2 * i - 2) % 10, (2 * i - 1) % 10]})
    write_pickle(folder / "test_batch", {b"data": cifar_rows(1, {(0, 2, 0, 31): 255}), b"labels": [4]})
    return tmp_path


def test_cifar10(cifar10_dir):
    d = load_cifar10(cifar10_dir)
    check_dataset(d, "cifar10", 10, (10, 3, 32, 32), (1, 3, 32, 32), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [4])
    x = d.train_x[0]
    assert x[0, 1, 2].item() == pytest.approx(z(255, 0, C10_MEAN, C10_STD), rel=1e-6)
    assert x[1, 5, 6].item() == pytest.approx(z(255, 1, C10_MEAN, C10_STD), rel=1e-6)
    assert x[2, 31, 0].item() == pytest.approx(z(102, 2, C10_MEAN, C10_STD), rel=1e-6)
    # nowhere else: the red plane is dark at the green pixel, the blue plane at the red one
    assert x[0, 5, 6].item() == pytest.approx(z(0, 0, C10_MEAN, C10_STD), rel=1e-6)
    assert x[2, 1, 2].item() == pytest.approx(z(0, 2, C10_MEAN, C10_STD), rel=1e-6)
    assert d.test_x[0, 2, 0, 31].item() == pytest.approx(z(255, 2, C10_MEAN, C10_STD), rel=1e-6)
    assert d.train_clients is None


def test_cifar10_root_may_be_the_batches_folder(cifar10_dir):
    assert load_cifar10(cifar10_dir / "cifar-10-batches-py").train_y.tolist() == list(range(10))


@pytest.fixture
def cifar100_dir(tmp_path):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    write_pickle(folder / "train", {b"data": cifar_rows(3, {(2, 1, 0, 0): 255}), b"fine_labels": [99, 0, 42],
                                    b"coarse_labels": [19, 0, 7], b"filenames": [b"a", b"b", b"c"]})
    write_pickle(folder / "test", {b"data": cifar_rows(2), b"fine_labels": [5, 6], b"coarse_labels": [1, 2]})
    return tmp_path


def test_cifar100_fine_and_coarse(cifar100_dir):
    fine = load_cifar100(cifar100_dir)
    assert fine.name == "cifar100" and fine.num_classes == 100
    assert fine.train_x.shape == (3, 3, 32, 32) and fine.test_x.shape == (2, 3, 32, 32)
    assert fine.train_y.tolist() == [99, 0, 42] and fine.test_y.tolist() == [5, 6]
    assert fine.train_x[2, 1, 0, 0].item() == pytest.approx(z(255, 1, C100_MEAN, C100_STD), rel=1e-6)
    assert fine.train_x[2, 0, 0, 0].item() == pytest.approx(z(0, 0, C100_MEAN, C100_STD), rel=1e-6)
    coarse = load_cifar100(cifar100_dir / "cifar-100-python", labels="coarse")
    assert coarse.num_classes == 20 and coarse.train_y.tolist() == [19, 0, 7] and coarse.test_y.tolist() == [1, 2]


def test_cifar100_unknown_labels(cifar100_dir):
    with pytest.raises(ValueError, match="unknown CIFAR-100 labels 'medium'"):
        load_cifar100(cifar100_dir, labels="medium")


def test_missing_folder(tmp_path):
    one_line_error(FileNotFoundError, tmp_path / "nope", load_cifar10, tmp_path / "nope")


def test_missing_batch(cifar10_dir):
    path = cifar10_dir / "cifar-10-batches-py" / "data_batch_3"
    path.unlink()
    assert "data_batch_1..5" in one_line_error(FileNotFoundError, path, load_cifar10, cifar10_dir)


def test_pickle_without_labels(cifar10_dir):
    path = write_pickle(cifar10_dir / "cifar-10-batches-py" / "data_batch_1", {b"data": cifar_rows(2)})
    message = one_line_error(ValueError, path, load_cifar10, cifar10_dir)
    assert message == f"{path}: expected a CIFAR-10 python pickle with b'data' and b'labels'"


def test_not_a_pickle(cifar10_dir):
    path = cifar10_dir / "cifar-10-batches-py" / "test_batch"
    path.write_bytes(b"\x00garbage, not a pickle")
    assert "python pickle" in one_line_error(ValueError, path, load_cifar10, cifar10_dir)


def test_rows_of_the_wrong_size(cifar100_dir):
    path = write_pickle(cifar100_dir / "cifar-100-python" / "test",
                        {b"data": np.zeros((2, 1024), np.uint8), b"fine_labels": [5, 6]})
    assert "(N, 3072)" in one_line_error(ValueError, path, load_cifar100, cifar100_dir)


def test_label_and_image_counts_differ(cifar100_dir):
    path = write_pickle(cifar100_dir / "cifar-100-python" / "train",
                        {b"data": cifar_rows(3), b"fine_labels": [1, 2], b"coarse_labels": [1, 2, 3]})
    assert "2 labels for 3" in one_line_error(ValueError, path, load_cifar100, cifar100_dir)
    assert load_cifar100(cifar100_dir, labels="coarse").train_y.tolist() == [1, 2, 3]


def test_label_out_of_range(cifar10_dir):
    path = write_pickle(cifar10_dir / "cifar-10-batches-py" / "test_batch", {b"data": cifar_rows(1), b"labels": [10]})
    assert "outside 0..9" in one_line_error(ValueError, path, load_cifar10, cifar10_dir)
