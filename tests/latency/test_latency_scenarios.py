"""Every bundled scenario under compute: latency, two rounds (the slow target: `pytest -m slow`)."""
import importlib.util

import pandas as pd
import pytest

from helpers import ROOT
from testbed.cli import main

NO_FLOWER = pytest.mark.skipif(importlib.util.find_spec("flwr") is None, reason="Flower (the flower extra) missing")
SCENARIOS = [pytest.param(p, marks=NO_FLOWER) if p.name.startswith("flower_") else p
             for p in sorted((ROOT / "scenarios").rglob("*.yaml"))]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_every_bundled_scenario_runs_on_the_latency_clock(scenario, tmp_path):
    args = ["run", str(scenario), "--quiet", "--set", "stop.max_rounds=2"]
    assert main([*args, "--out", str(tmp_path / "latency"), "--set", "compute=latency"]) == 0
    events = pd.read_csv(next(tmp_path.glob("latency/*/0/events.csv")))
    compute = events[events.phase == "compute"]
    assert len(compute) and ((compute.end_s - compute.start_s) > 0).all()
