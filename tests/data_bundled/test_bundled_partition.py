import math

import numpy as np
import pytest

from testbed.data import PARTITIONERS
from testbed.data.partition import (js_divergence, label_histograms, natural, non_iid_degree,
                                    split_clients)

# 6 natural clients with 3, 1, 4, 2, 5, 6 samples, interleaved in the training set
CLIENTS = np.array([0, 2, 4, 5, 1, 2, 4, 5, 0, 2, 3, 4, 5, 0, 2, 3, 4, 5, 4, 5, 5])
LABELS = np.arange(len(CLIENTS)) % 3


def _rng(seed=0):
    return np.random.default_rng(seed)


def test_natural_with_as_many_devices_as_clients_gives_every_client():
    parts = natural(LABELS, 6, _rng(), clients=CLIENTS)
    assert [len(p) for p in parts] == [3, 1, 4, 2, 5, 6]
    for k, part in enumerate(parts):
        assert np.array_equal(part, np.flatnonzero(CLIENTS == k))


def test_natural_picks_a_seeded_sorted_subset_of_clients():
    picks = []
    for seed in range(20):
        parts = natural(LABELS, 3, _rng(seed), clients=CLIENTS)
        ids = [int(np.unique(CLIENTS[p])[0]) for p in parts]
        assert all(len(np.unique(CLIENTS[p])) == 1 for p in parts)  # each part is one whole client
        assert all(len(p) == (CLIENTS == k).sum() for p, k in zip(parts, ids))
        assert ids == sorted(set(ids)) and len(ids) == 3
        picks.append(tuple(ids))
    again = natural(LABELS, 3, _rng(0), clients=CLIENTS)
    assert [int(CLIENTS[p][0]) for p in again] == list(picks[0])
    assert len(set(picks)) > 3  # the draw depends on the seed


def test_natural_refuses_more_devices_than_clients():
    with pytest.raises(ValueError, match=r"^the dataset has only 6 natural clients; use at most 6 devices$"):
        natural(LABELS, 7, _rng(), clients=CLIENTS)
    # clients too small for min_samples are not eligible
    parts = natural(LABELS, 4, _rng(), clients=CLIENTS, min_samples=3)
    assert all(len(p) >= 3 for p in parts)
    with pytest.raises(ValueError, match="only 4 natural clients with at least 3 training samples; use at most 4"):
        natural(LABELS, 5, _rng(), clients=CLIENTS, min_samples=3)


def test_natural_is_registered_with_the_common_call():
    parts = PARTITIONERS["natural"](LABELS, 2, _rng(), min_samples=1, clients=CLIENTS)
    assert len(parts) == 2
    with pytest.raises(ValueError, match="client ids"):
        natural(LABELS, 2, _rng(), clients=CLIENTS[:-1])


def test_split_clients_sizes_and_disjointness():
    parts = [np.arange(0, 100), np.arange(100, 110), np.array([200, 201, 202])]
    train, val, test = split_clients(parts, _rng(), val_fraction=0.1, test_fraction=0.2)
    assert [len(t) for t in test] == [20, 2, 1] and [len(v) for v in val] == [10, 1, 1]  # rounded up
    assert [len(t) for t in train] == [70, 7, 1]
    for p, a, b, c in zip(parts, train, val, test):
        joined = np.concatenate([a, b, c])
        assert len(joined) == len(p) and np.array_equal(np.sort(joined), np.sort(p))
        assert all((np.diff(x) > 0).all() for x in (a, b, c))
    again = split_clients(parts, _rng(), val_fraction=0.1, test_fraction=0.2)
    assert all(np.array_equal(x, y) for x, y in zip(test, again[2]))
    other = split_clients(parts, _rng(1), val_fraction=0.1, test_fraction=0.2)
    assert not np.array_equal(test[0], other[2][0])


def test_split_clients_keeps_a_training_sample_on_tiny_clients():
    parts = [np.array([7]), np.array([3, 4]), np.array([1, 2, 5, 6])]
    train, val, test = split_clients(parts, _rng(), val_fraction=0.45, test_fraction=0.5)
    assert [len(t) for t in train] == [1, 1, 1]
    assert [len(v) for v in val] == [0, 0, 1] and [len(t) for t in test] == [0, 1, 2]  # val shrinks first
    with pytest.raises(ValueError):
        split_clients(parts, _rng(), val_fraction=0.5, test_fraction=0.5)
    with pytest.raises(ValueError):
        split_clients(parts, _rng(), val_fraction=-0.1, test_fraction=0.2)


def test_js_divergence_by_hand():
    # p = [1, 0], q = [1/2, 1/2]: M = [3/4, 1/4]; KL(p||M) = log2(4/3), KL(q||M) = (log2(2/3) + 1) / 2
    by_hand = 0.5 * math.log2(4 / 3) + 0.25 * (math.log2(2 / 3) + 1)
    assert by_hand == pytest.approx(1.5 - 0.75 * math.log2(3))
    assert js_divergence([1, 0], [0.5, 0.5]) == pytest.approx(by_hand, abs=1e-12) == pytest.approx(0.311278, abs=1e-6)
    assert js_divergence([0.2, 0.3, 0.5], [0.2, 0.3, 0.5]) == 0.0
    assert js_divergence([1, 0, 0, 0], [0, 0.5, 0.5, 0]) == pytest.approx(1.0)
    assert js_divergence([3, 1], [6, 2]) == 0.0  # counts are normalised
    assert js_divergence([1, 3], [2, 2]) == pytest.approx(js_divergence([2, 2], [1, 3]))


def test_js_divergence_matches_feddumap_server_data_degrees():
    # FedDUMAP: server data covering 2 of 10 classes has d = 0.61, covering 5 of 10 d = 0.31 (log base 2)
    uniform = np.full(10, 0.1)
    assert round(js_divergence([1] * 2 + [0] * 8, uniform), 2) == 0.61
    assert round(js_divergence([1] * 5 + [0] * 5, uniform), 3) == 0.311


def test_js_divergence_agrees_with_scipy():
    distance = pytest.importorskip("scipy.spatial.distance")
    rng = _rng(5)
    for _ in range(50):
        p, q = rng.random(7), rng.random(7)
        p[rng.random(7) < 0.3] = 0  # zeros too
        p[0] += 0.01
        assert js_divergence(p, q) == pytest.approx(distance.jensenshannon(p, q, base=2) ** 2, abs=1e-12)


def test_non_iid_degree():
    hist = np.array([[10, 0], [0, 30]])  # the global distribution is count-weighted: [1/4, 3/4]
    per_client, mean = non_iid_degree(hist)
    expected = [js_divergence([1, 0], [0.25, 0.75]), js_divergence([0, 1], [0.25, 0.75])]
    assert per_client == pytest.approx(expected) and mean == pytest.approx(np.mean(expected))
    assert expected[0] > expected[1] > 0  # the small client is further from the pooled data
    iid_like, zero = non_iid_degree(np.array([[5, 10, 5], [10, 20, 10]]))
    assert zero == 0.0 and (iid_like == 0).all()
    halves, mean = non_iid_degree(np.array([[5, 5, 0, 0], [0, 0, 5, 5]]))
    assert mean == pytest.approx(1.5 - 0.75 * math.log2(3))


def test_non_iid_degree_of_partitions():
    labels = np.repeat(np.arange(10), 40)
    shards = PARTITIONERS["shards"](labels, 20, _rng(), classes_per_client=1)
    iid = PARTITIONERS["iid"](labels, 20, _rng())
    _, d_shards = non_iid_degree(label_histograms(labels, shards, 10))
    _, d_iid = non_iid_degree(label_histograms(labels, iid, 10))
    # one class per client against 10 balanced classes: M = 0.55 on its class, 0.05 elsewhere
    one_class = 0.5 * (math.log2(1 / 0.55) + 0.1 * math.log2(0.1 / 0.55) + 0.9 * math.log2(0.1 / 0.05))
    assert d_shards == pytest.approx(one_class) == pytest.approx(0.758277, abs=1e-6)
    assert d_iid < 0.1 < d_shards
