"""Fixtures of the selectors' tests: the tests' tiny data set by name, and fedprox_deadline's short uniform run
kept for the session (each selector's test compares against it at the cost of one run)."""
import pytest
from helpers import tiny_blobs
from selection_runs import run_deadline

import testbed.data


@pytest.fixture(autouse=True)
def tiny_data(monkeypatch):
    """The tests' tiny data set (helpers.tiny_blobs) by name, for tiny_scenario's runs."""
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)


@pytest.fixture(scope="session")
def uniform_deadline_run():
    return run_deadline("uniform")
