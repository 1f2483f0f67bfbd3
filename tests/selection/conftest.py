"""Shared pieces of the selectors' tests: scenarios/fedprox_deadline.yaml run for 3 rounds with a selector (the
uniform run kept for the session, so each selector's test compares against it at the cost of one run), and the
registry a run's server builds."""
import pandas as pd
import pytest
import torch
from helpers import ROOT, simulate, tiny_blobs

import testbed.data
from testbed import scenario as sc
from testbed.protocols.kit import Kit
from testbed.scenario_file import apply_overrides, read_yaml

DEADLINE = ROOT / "scenarios" / "fedprox_deadline.yaml"
# 3 rounds; a 10 s deadline (its 30 s one binds no round of the first 3: the slowest phones upload in ~16 s);
# one evaluation, of 200 samples, at the end: the run is its training
SHORT = ["stop.max_rounds=3", "round.deadline_s=10", "eval.every_rounds=3", "eval.max_samples=200"]


def deadline_raw(*overrides: str) -> dict:
    return apply_overrides(read_yaml(DEADLINE), [*SHORT, *overrides])


def run_deadline(selection: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """rounds and events of fedprox_deadline's short run with this selector."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # two threads contend with the other tests for 2 cores
    try:
        records, events = simulate(deadline_raw(f"selection.name={selection}"))
    finally:
        torch.set_num_threads(threads)
    return pd.DataFrame(records), pd.DataFrame(events)


@pytest.fixture(autouse=True)
def tiny_data(monkeypatch):
    """The tests' tiny data set (helpers.tiny_blobs) by name, for tiny_scenario's runs."""
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)


@pytest.fixture(scope="session")
def uniform_deadline_run():
    return run_deadline("uniform")


def registry_of(raw: dict):
    """The registry the server of this scenario builds."""
    return Kit(sc.build(sc.validate(raw, "test", ROOT)), lambda *a: None).registry


def selected_by_round(events: pd.DataFrame) -> dict[int, list[int]]:
    return {int(r): sorted(g.device.unique().tolist()) for r, g in events.groupby("round")}
