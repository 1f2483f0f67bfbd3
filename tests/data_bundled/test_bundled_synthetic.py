import numpy as np
import pytest
import torch

from testbed.data.synthetic import load_synthetic


def test_same_seed_same_data_and_other_seed_other_data():
    a, b, c = load_synthetic(seed=0), load_synthetic(seed=0), load_synthetic(seed=1)
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.test_y, b.test_y)
    assert np.array_equal(a.train_clients, b.train_clients)
    assert a.train_x.shape != c.train_x.shape or not torch.equal(a.train_x, c.train_x)


def test_shapes_labels_and_documented_size():
    d = load_synthetic()
    assert d.name == "synthetic_1_1" and d.num_classes == 10
    assert d.train_x.dtype == torch.float32 and d.train_y.dtype == torch.int64
    assert d.train_x.shape == (4298, 60) and d.test_x.shape == (1087, 60)  # as the module docstring says
    labels = torch.cat([d.train_y, d.test_y])
    assert labels.min() >= 0 and labels.max() <= 9 and len(labels.unique()) == 10
    small = load_synthetic(alpha=0.5, beta=0.5, num_clients=5, dim=7, num_classes=3, seed=4)
    assert small.train_x.shape[1] == 7 and small.num_classes == 3 and small.train_y.max() <= 2


def test_natural_clients_and_their_80_20_split():
    d = load_synthetic(num_clients=30, seed=2)
    n_train = np.bincount(d.train_clients, minlength=30)
    n_test = np.bincount(d.test_clients, minlength=30)
    assert len(n_train) == 30 and (n_train >= 40).all() and (n_test >= 10).all()
    assert np.array_equal(n_train, ((n_train + n_test) * 0.8).astype(int))  # int(0.8 * n_k) train
    assert len(d.train_clients) == len(d.train_y) and len(d.test_clients) == len(d.test_y)
    assert (n_train + n_test).min() >= 50  # lognormal sizes + 50, FedProx's


def test_input_covariance_is_diagonal_j_to_the_minus_1_2():
    d = load_synthetic(seed=3)
    x, c = torch.cat([d.train_x, d.test_x]).double().numpy(), np.concatenate([d.train_clients, d.test_clients])
    centred = np.concatenate([x[c == k] - x[c == k].mean(0) for k in np.unique(c)])
    variance = centred.var(0)
    expected = np.arange(1, 61) ** -1.2
    assert np.allclose(variance / expected, 1, atol=0.12)
    off_diagonal = np.corrcoef(centred[:, :5].T)[np.triu_indices(5, 1)]
    assert np.abs(off_diagonal).max() < 0.1


def test_labels_follow_a_linear_model_per_client():
    # y = argmax(W_k x + b_k): within one client, the classes are linearly separable
    linear_model = pytest.importorskip("sklearn.linear_model")
    d = load_synthetic(seed=2)
    sizes = np.bincount(d.train_clients)
    n_classes = np.array([len(np.unique(d.train_y.numpy()[d.train_clients == k])) for k in range(30)])
    k = int(np.argmax(np.where(n_classes >= 3, sizes, 0)))  # clients are skewed: some see one class only
    x, y = d.train_x.numpy()[d.train_clients == k], d.train_y.numpy()[d.train_clients == k]
    assert len(y) > 1000  # far more samples than the 60 dimensions, so separability is not by chance
    fit = linear_model.LogisticRegression(C=1e4, max_iter=5000).fit(x, y)
    assert fit.score(x, y) > 0.97


def test_bad_arguments():
    with pytest.raises(ValueError):
        load_synthetic(alpha=-1)
    with pytest.raises(ValueError):
        load_synthetic(num_classes=1)
