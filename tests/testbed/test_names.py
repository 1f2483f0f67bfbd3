"""testbed/names.py's tables, which let the schema check a scenario without importing torch, agree with the code
they stand for: every registry entry imports to the object it names, each built-in dataset's parameters are its
loader's, FjORD's default levels are LevelsUpToCapability's, and the tables list every name the schema had
before they were lazy (the models' and datasets' modules, the codecs' Dense)."""
import inspect

import pytest

from testbed import names
from testbed.algorithms import LevelsUpToCapability
from testbed.models import CNN512, VGG11
from testbed.payload import Dense
from testbed.schema.algorithms.submodels import FJORD_LEVELS


@pytest.mark.parametrize("registry", [names.DATASETS, names.MODELS, names.CODECS])
def test_every_entry_imports(registry):
    for name, entry in registry.items():   # items() looks every entry up
        assert callable(entry) or isinstance(entry, Dense), name
        assert not isinstance(registry.data[name], str), name   # looked up once, kept


def test_entries_are_the_objects_they_name():
    assert names.MODELS["cnn_512"] is CNN512 and names.MODELS["vgg11_gn"].func is VGG11
    assert names.MODELS["vgg11_gn"].keywords == {"norm": "gn"}
    assert names.CODECS["fp32"] == Dense("float32") and names.CODECS["fp16"] == Dense("float16")
    import testbed.data
    import testbed.models
    import testbed.payload
    assert testbed.data.DATASETS is names.DATASETS and testbed.models.MODELS is names.MODELS
    assert testbed.payload.CODECS is names.CODECS


def test_dataset_parameters_are_the_loaders():
    assert set(names.DATASET_PARAMETERS) == set(names.DATASETS)
    for name, parameters in names.DATASET_PARAMETERS.items():
        signature = inspect.signature(names.DATASETS[name]).parameters
        assert tuple(signature) == parameters, name
        # "root" is the one parameter a loader needs; every other has a default
        assert {n for n, p in signature.items() if p.default is inspect.Parameter.empty} == \
            ({"root"} & set(parameters)), name


def test_fjord_levels_are_levels_up_to_capability_default():
    assert FJORD_LEVELS == LevelsUpToCapability().levels


def test_an_added_entry_is_kept_as_given_and_removable(monkeypatch):
    def loader():
        return None
    monkeypatch.setitem(names.DATASETS, "mine", loader)
    assert names.DATASETS["mine"] is loader and "mine" in names.DATASETS
    monkeypatch.undo()
    assert "mine" not in names.DATASETS
