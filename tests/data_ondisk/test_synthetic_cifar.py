"""benchmarks/synthetic_cifar.py writes CIFAR-10's python version that the testbed's own loader reads, with
balanced classes that a model can tell apart (here: nearest class mean, well above chance), once per setting."""
import importlib.util

import numpy as np
from helpers import ROOT

from testbed.data.cifar import load_cifar10

_spec = importlib.util.spec_from_file_location("synthetic_cifar", ROOT / "benchmarks" / "synthetic_cifar.py")
synthetic_cifar = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(synthetic_cifar)


def test_the_loader_reads_it_and_the_classes_are_learnable(tmp_path):
    folder = synthetic_cifar.write_synthetic_cifar10(tmp_path, scale=0.01)
    assert sorted(p.name for p in folder.iterdir()) == [
        "batches.meta", "data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5",
        "synthetic.json", "test_batch"]
    data = load_cifar10(tmp_path)
    assert tuple(data.train_x.shape) == (500, 3, 32, 32) and tuple(data.test_x.shape) == (100, 3, 32, 32)
    assert np.bincount(data.train_y.numpy()).tolist() == [50] * 10
    x, y = data.train_x.flatten(1).numpy(), data.train_y.numpy()
    means = np.stack([x[y == c].mean(0) for c in range(10)])
    test = data.test_x.flatten(1).numpy()
    nearest = ((test[:, None, :] - means[None]) ** 2).sum(-1).argmin(1)
    assert (nearest == data.test_y.numpy()).mean() > 0.5


def test_a_folder_written_with_the_same_settings_is_kept(tmp_path):
    folder = synthetic_cifar.write_synthetic_cifar10(tmp_path, scale=0.002)
    before = (folder / "data_batch_1").stat().st_mtime_ns
    synthetic_cifar.write_synthetic_cifar10(tmp_path, scale=0.002)
    assert (folder / "data_batch_1").stat().st_mtime_ns == before
    synthetic_cifar.write_synthetic_cifar10(tmp_path, scale=0.002, seed=1)
    assert len(load_cifar10(tmp_path).train_y) == 100
