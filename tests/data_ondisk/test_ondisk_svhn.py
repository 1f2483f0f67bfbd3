import numpy as np
import pytest
import scipy.io
from ondisk_files import check_dataset, one_line_error, write_svhn

from testbed.data.svhn import load_svhn

MEAN, STD = (0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970)


def z(pixel: int, channel: int) -> float:
    return (pixel / 255 - MEAN[channel]) / STD[channel]


@pytest.fixture
def svhn_dir(tmp_path):
    """train: 3 images, labels 10 (the digit 0), 3, 9; image 0 has green 255 at (row 4, col 7) and red 51 at
    (row 0, col 31); test: 2 images, labels 1, 10."""
    x = np.zeros((32, 32, 3, 3), np.uint8)  # SVHN's (height, width, channel, image)
    x[4, 7, 1, 0] = 255
    x[0, 31, 0, 0] = 51
    x[31, 30, 2, 2] = 255
    write_svhn(tmp_path / "train_32x32.mat", x, [10, 3, 9])
    write_svhn(tmp_path / "test_32x32.mat", np.zeros((32, 32, 3, 2), np.uint8), [1, 10])
    return tmp_path


def test_svhn(svhn_dir):
    d = load_svhn(svhn_dir)
    check_dataset(d, "svhn", 10, (3, 3, 32, 32), (2, 3, 32, 32), [0, 3, 9], [1, 0])
    assert d.train_x[0, 1, 4, 7].item() == pytest.approx(z(255, 1), rel=1e-6)
    assert d.train_x[0, 0, 4, 7].item() == pytest.approx(z(0, 0), rel=1e-6)
    assert d.train_x[0, 1, 7, 4].item() == pytest.approx(z(0, 1), rel=1e-6)
    assert d.train_x[0, 0, 0, 31].item() == pytest.approx(z(51, 0), rel=1e-6)
    assert d.train_x[2, 2, 31, 30].item() == pytest.approx(z(255, 2), rel=1e-6)
    assert d.train_x[1].eq(d.train_x[1, :, :1, :1]).all()  # image 1 is black: each channel one value


def test_missing_folder(tmp_path):
    one_line_error(FileNotFoundError, tmp_path / "nope", load_svhn, tmp_path / "nope")


def test_missing_file(svhn_dir):
    (svhn_dir / "test_32x32.mat").unlink()
    message = one_line_error(FileNotFoundError, svhn_dir / "test_32x32.mat", load_svhn, svhn_dir)
    assert "train_32x32.mat and test_32x32.mat" in message


def test_not_a_mat_file(svhn_dir):
    path = svhn_dir / "train_32x32.mat"
    path.write_bytes(b"not a matlab file at all")
    assert "expected an SVHN .mat" in one_line_error(ValueError, path, load_svhn, svhn_dir)


def test_mat_without_x(svhn_dir):
    path = svhn_dir / "test_32x32.mat"
    scipy.io.savemat(path, {"y": np.array([[1]], np.uint8)})
    assert "expected an SVHN .mat" in one_line_error(ValueError, path, load_svhn, svhn_dir)


def test_label_and_image_counts_differ(svhn_dir):
    path = write_svhn(svhn_dir / "test_32x32.mat", np.zeros((32, 32, 3, 2), np.uint8), [1, 2, 3])
    assert "3 labels for 2 images" in one_line_error(ValueError, path, load_svhn, svhn_dir)


def test_label_zero_is_an_error(svhn_dir):
    path = write_svhn(svhn_dir / "test_32x32.mat", np.zeros((32, 32, 3, 2), np.uint8), [0, 2])
    assert "label 0" in one_line_error(ValueError, path, load_svhn, svhn_dir)
