"""Datasets (name -> loader; testbed/names.py, each imported where first looked up) and partitioners (kind ->
function): registries.

Bundled datasets load with no arguments; on-disk ones take `root`, the folder that holds their files.
"""
from testbed.data.dataset import Dataset
from testbed.data.partition import PARTITIONERS, label_histograms
from testbed.names import DATASETS   # imported where first looked up, so that the schema needs no torch

__all__ = ["DATASETS", "PARTITIONERS", "Dataset", "label_histograms"]
