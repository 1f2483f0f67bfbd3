import numpy as np
import pytest

from testbed.data.partition import dirichlet, iid, label_histograms, shards, split_clients

LABELS = np.repeat(np.arange(10), 40)  # 400 samples, 40 per class


def _is_partition(parts):
    joined = np.concatenate(parts)
    return len(joined) == len(LABELS) and len(np.unique(joined)) == len(LABELS)


def test_iid_sizes():
    parts = iid(LABELS, 7, np.random.default_rng(0))
    assert _is_partition(parts) and sorted(len(p) for p in parts) == [57] * 6 + [58]


def test_shards_give_each_client_its_classes():
    parts = shards(LABELS, 20, np.random.default_rng(0), classes_per_client=2)
    assert _is_partition(parts)
    hist = label_histograms(LABELS, parts, 10)
    assert (hist.sum(1) == 20).all() and ((hist > 0).sum(1) <= 2).all()


def test_dirichlet_is_seeded_and_respects_min_samples():
    a = dirichlet(LABELS, 10, np.random.default_rng(1), alpha=0.5, min_samples=5)
    b = dirichlet(LABELS, 10, np.random.default_rng(1), alpha=0.5, min_samples=5)
    assert _is_partition(a) and all(np.array_equal(x, y) for x, y in zip(a, b))
    assert min(len(p) for p in a) >= 5
    skew = label_histograms(LABELS, a, 10).max(1) / np.array([len(p) for p in a])
    assert skew.mean() > 0.3  # non-IID: a dominant class per client (IID would give about 0.1)


def test_too_many_clients_is_an_error():
    with pytest.raises(ValueError, match="use at most 400 devices"):
        iid(LABELS, 401, np.random.default_rng(0))


def test_split_clients_without_held_out_data_sorts_each_part_and_draws_nothing():
    rng = np.random.default_rng(0)
    parts = [rng.choice(1000, size=rng.integers(1, 20), replace=False) for _ in range(300)]
    split_rng = np.random.default_rng(1)
    train, val, test = split_clients(parts, split_rng, 0, 0)
    assert all(np.array_equal(t, np.sort(p)) and t.dtype == np.int64 for t, p in zip(train, parts))
    assert all(len(v) == len(t) == 0 for v, t in zip(val, test)) and len(val) == len(test) == 300
    assert split_rng.random() == np.random.default_rng(1).random()   # the stream is untouched
