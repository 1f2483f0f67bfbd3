import numpy as np
import pytest
import torch

from testbed.data.digits import load_digits

sklearn_datasets = pytest.importorskip("sklearn.datasets")


@pytest.fixture(scope="module")
def digits():
    return load_digits()


def test_shapes_and_types(digits):
    assert digits.name == "digits" and digits.num_classes == 10
    assert digits.train_x.shape == (1442, 1, 8, 8) and digits.test_x.shape == (355, 1, 8, 8)
    assert digits.train_x.dtype == torch.float32 and digits.train_y.dtype == torch.int64
    assert digits.train_clients is None and digits.test_clients is None


def test_split_is_stratified_every_fifth_digit_of_each_class(digits):
    bunch = sklearn_datasets.load_digits()
    per_class = np.bincount(bunch.target)
    assert np.array_equal(np.bincount(digits.test_y.numpy(), minlength=10), per_class // 5)
    assert np.array_equal(np.bincount(digits.train_y.numpy(), minlength=10), per_class - per_class // 5)
    # the test images are, class by class, the 5th, 10th, ... digit of that class in scikit-learn's order
    test_idx = np.sort(np.concatenate([np.flatnonzero(bunch.target == c)[4::5] for c in range(10)]))
    pixels = digits.test_x.numpy().reshape(-1, 64)
    scaled = (pixels - pixels.min()) / (pixels.max() - pixels.min())  # undo the affine normalisation
    assert np.allclose(scaled, bunch.data[test_idx] / bunch.data[test_idx].max(), atol=1e-5)
    assert np.array_equal(digits.test_y.numpy(), bunch.target[test_idx])


def test_split_is_fixed(digits):
    again = load_digits()
    assert torch.equal(again.test_x, digits.test_x) and torch.equal(again.train_y, digits.train_y)


def test_normalised_with_training_statistics(digits):
    assert abs(digits.train_x.mean().item()) < 1e-4 and abs(digits.train_x.std().item() - 1) < 1e-3
    span = digits.train_x.max() - digits.train_x.min()  # [0, 1] pixels over one std of about 0.376
    assert 2.6 < span.item() < 2.7
