"""Every built-in plugin through the contract checks (testbed/contracts.py, a run built with check_builtins): each
strategy (testbed.schema.algorithms.BUILTIN) under the synchronous protocol on two devices, the asynchronous and
hierarchical ones with FedAvg, each selector (testbed.selection.SELECTORS), each zoo model on its papers' input
(testbed/models/summary.py): none trips a check, so "internal error ... a bug in the testbed" stays for our bugs.
The loaders' datasets are checked by testbed/data/loading.py before every run already (Dataset.problems)."""
import copy

import pytest
import torch
from helpers import TINY_CLASSES, simulate, tiny_blobs, tiny_scenario

import testbed.contracts
import testbed.data
from testbed.schema.algorithms import BUILTIN
from testbed.selection import SELECTORS

SIX = {"groups": [{"profile": "raspberry_pi_4", "count": 3},
                  {"profile": "jetson_nano", "count": 3, "availability": {"kind": "markov", "mean_on_s": 60,
                                                                           "mean_off_s": 30}}]}


@pytest.fixture(autouse=True)
def tiny(monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)


def _six(raw: dict, **sections) -> dict:
    """The tiny scenario on six devices (three of them coming and going), two a round, with these sections."""
    raw = copy.deepcopy(raw) | {"fleet": SIX, "round": {"clients_per_round": 2, "deadline_s": 600}}
    return raw | sections


@pytest.mark.parametrize("name", list(BUILTIN))
def test_every_built_in_strategy_keeps_its_contract(name):
    raw = tiny_scenario({"name": name}, rounds=2)   # two devices: what every algorithm's own tests run on
    raw["data"] = raw["data"] | {"client_split": {"test_fraction": 0.2}}   # personal models are scored too
    if name in {"data_sharing", "feddumap", "feddu", "feddu_s", "feddum", "serverm", "devicem", "fedduap", "fedap",
                "hrank", "imc", "prunefl", "hybrid_fl"}:   # NEEDS_SERVER_DATA
        raw["data"] = raw["data"] | {"server": {"fraction": 0.2, "classes": TINY_CLASSES}}
    records, _ = simulate(raw, check_builtins=True)
    assert len(records) == 2


@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_every_built_in_selector_keeps_its_contract(name):
    records, _ = simulate(_six(tiny_scenario({"name": "fedavg"}, rounds=3), selection={"name": name}),
                          check_builtins=True)
    assert len(records) == 3 and all(r["selected"] > 0 for r in records)


@pytest.mark.parametrize("protocol", [{"kind": "async", "concurrency": 3, "buffer_size": 2},
                                      {"kind": "async", "concurrency": 2, "buffer_size": 1, "mixing": 0.5}])
def test_the_asynchronous_protocol_keeps_the_contracts(protocol):
    raw = _six(tiny_scenario({"name": "fedavg"}, rounds=3), protocol=protocol)
    del raw["round"]["deadline_s"]
    records, _ = simulate(raw, check_builtins=True)
    assert len(records) == 3


def test_the_hierarchical_protocol_keeps_the_contracts():
    raw = _six(tiny_scenario({"name": "fedavg"}, rounds=2), protocol={"kind": "hierarchical", "edge_rounds": 2},
               network={"cells": [{"name": "cell", "count": 2, "down_Bps": 1e6, "up_Bps": 1e6, "groups": [0, 1],
                                   "backhaul": {"down_Bps": 1e6, "up_Bps": 1e6, "latency_s": 0.01}}]})
    raw["round"] = {"clients_per_round": 1}
    records, _ = simulate(raw, check_builtins=True)
    assert len(records) == 2


def test_every_zoo_model_gives_a_logit_a_class():
    from testbed.models import MODELS
    from testbed.models.summary import REFERENCE_INPUTS

    for name, (example, num_classes) in REFERENCE_INPUTS.items():
        x = example()
        model = MODELS[name](tuple(x.shape[1:]), num_classes, 1.0)
        testbed.contracts.check_model(name, model, torch.cat([x, x]), num_classes, check_builtins=True)
    assert set(REFERENCE_INPUTS) == set(MODELS)


@pytest.mark.parametrize("check_builtins", [False, True])
def test_the_run_says_whether_its_built_ins_are_checked(check_builtins):
    """An explicit value of the run (build's check_builtins, handed to its Contracts), not a module switch."""
    from testbed import scenario as sc

    exp = sc.build(sc.validate(tiny_scenario({"name": "fedavg"}), "test"), check_builtins=check_builtins)
    assert exp.contracts.strategy.checked is exp.contracts.selector.checked is check_builtins
