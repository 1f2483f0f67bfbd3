"""Every bundled scenario, run in full as shipped (seed 0, one torch thread), reaches its stop.target_accuracy and
ends completed: none is at the edge of divergence (issue 45). Seeds 0-4 on 1 and 2 threads were checked by hand
(docs/stability.md); here seed 0 guards each against a change that tips it over. The quickstart and
HAR have tests of their own (test_cli.py, tests/data_bundled/test_bundled_har.py). Long: `pytest -m targets`."""
import json

import pytest
import yaml
from helpers import ROOT
from test_cli import NO_FLOWER

from testbed.cli import main

OWN_TESTS = {"quickstart.yaml", "har.yaml"}
SCENARIOS = [pytest.param(p, marks=[NO_FLOWER] if p.name.startswith("flower_") else [])
             for p in sorted((ROOT / "scenarios").glob("*.yaml")) if p.name not in OWN_TESTS]


@pytest.mark.slow
@pytest.mark.targets
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_every_bundled_scenario_reaches_its_target(scenario, tmp_path):
    target = yaml.safe_load(scenario.read_text())["stop"]["target_accuracy"]
    assert main(["run", str(scenario), "--out", str(tmp_path), "--quiet", "--set", "executor.threads=1"]) == 0
    summary = json.loads(next(tmp_path.glob("*/0/summary.json")).read_text())
    assert summary["status"] == "completed"
    assert summary["time_to_accuracy_s"][str(target)] is not None, (scenario.name, summary["final_accuracy"])
