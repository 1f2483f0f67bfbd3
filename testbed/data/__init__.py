"""Datasets (name -> loader; testbed/names.py, each imported where first looked up) and partitioners (kind ->
function): registries.

Bundled datasets load with no arguments; on-disk ones take `root`, the folder that holds their files.
"""
from testbed.data.dataset import Dataset
from testbed.data.flower_partition import partition as flwr   # imports Flower Datasets only when it partitions
from testbed.data.partition import dirichlet, iid, label_histograms, natural, shards
from testbed.names import DATASETS   # imported where first looked up, so that the schema needs no torch

# kind -> function(labels, n_clients, rng, min_samples=..., **the section's fields): one index array per device.
# Here, above both partition.py and flower_partition.py, since Flower's adapter draws clients as partition.py does.
PARTITIONERS = {"iid": iid, "dirichlet": dirichlet, "shards": shards, "natural": natural, "flwr": flwr}

__all__ = ["DATASETS", "PARTITIONERS", "Dataset", "label_histograms"]
