"""Per-device train / validation / local test data, and the personalized evaluation built on it."""
import numpy as np
import torch
from helpers import simulate

from testbed.data.clients import assign
from testbed.data.dataset import Dataset

FLOPS_PER_SAMPLE = 3 * 480_500  # cnn_fedlps, one training pass


def _toy(natural: bool) -> Dataset:
    x = torch.arange(12.0).reshape(12, 1)
    clients = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]) if natural else None
    test_clients = np.array([2, 0, 0, 1]) if natural else None
    return Dataset("toy", x, torch.zeros(12, dtype=torch.long), torch.tensor([[20.0], [21.0], [22.0], [23.0]]),
                   torch.zeros(4, dtype=torch.long), 2, clients, test_clients)


def test_test_fraction_carves_local_test_sets_from_each_device():
    parts = [np.arange(0, 8), np.arange(8, 12)]
    data = assign(_toy(False), parts, np.random.default_rng(0), validation_fraction=0.25, test_fraction=0.25,
                  natural=False)
    assert [len(t) for t in data.train] == [4, 2] and [len(v) for v in data.validation] == [2, 1]
    assert list(data.local_test_sizes()) == [2, 1]
    for device, part in enumerate(parts):  # each device's held-out samples are its own, and not trained on
        held_out = data.local_test_x[data.local_test_owner == device].flatten().long().numpy()
        assert set(held_out) <= set(part) and not set(held_out) & set(data.train[device])


def test_natural_clients_bring_their_own_test_data():
    data = _toy(True)
    parts = [np.array([8, 9, 10, 11]), np.array([0, 1, 2, 3])]  # devices 0 and 1 are clients 2 and 0
    clients = assign(data, parts, np.random.default_rng(0), 0.0, 0.0, natural=True)
    assert clients.local_test_x[clients.local_test_owner == 0].flatten().tolist() == [20.0]
    assert clients.local_test_x[clients.local_test_owner == 1].flatten().tolist() == [21.0, 22.0]
    assert [list(t) for t in clients.train] == [list(p) for p in parts]


def test_devices_train_only_on_their_training_split(two_devices):
    two_devices["data"]["client_split"] = {"test_fraction": 0.25}  # 2,000 digits each: 500 held out
    two_devices["stop"] = {"max_rounds": 1}
    record = simulate(two_devices)[0][0]
    assert record["flops"] == 2 * FLOPS_PER_SAMPLE * 1500
    assert 0 <= record["local_accuracy_p10"] <= record["local_accuracy"] <= 1
