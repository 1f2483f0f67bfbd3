"""Datasets (name -> loader) and partitioners (kind -> function): plain dict registries."""
from testbed.data.dataset import Dataset
from testbed.data.mnist5k import load_mnist5k
from testbed.data.partition import PARTITIONERS, label_histograms

DATASETS = {"mnist5k": load_mnist5k}

__all__ = ["DATASETS", "PARTITIONERS", "Dataset", "label_histograms"]
