"""fleet.heterogeneity: low / medium / high keep the first 2, 3 or all tiers of every tiered group."""
import numpy as np
import pytest
from helpers import write_yaml

import devices
from testbed import scenario as sc
from testbed.cli import main

TIERS = [1, 0.5, 0.25, 0.125, 0.0625]


def _fleet(two_devices, level, tiers=TIERS):
    two_devices["fleet"]["groups"][0]["count"] = 50
    two_devices["fleet"]["groups"][0]["tiers"] = tiers
    two_devices["fleet"]["groups"][0]["resample_tiers_each_round"] = True
    if level:
        two_devices["fleet"]["heterogeneity"] = level
    return sc.validate(two_devices)


@pytest.mark.parametrize("level, kept", [("low", {1, 0.5}), ("medium", {1, 0.5, 0.25}), ("high", set(TIERS)),
                                         (None, set(TIERS))])
def test_levels_keep_the_first_tiers_of_tiered_groups(two_devices, level, kept):
    fleet = devices.Fleet.build(_fleet(two_devices, level).fleet.specs(), np.random.SeedSequence(0))
    seen = set(np.concatenate([fleet.tier_at(r)[:50] for r in range(20)]).tolist())
    assert seen == kept  # 50 devices x 20 rounds draw every kept tier
    assert fleet.tier_at(3)[50] == 1.0  # the untiered group trains at its full capability at every level


def test_the_resolved_scenario_keeps_the_written_tiers(two_devices):
    """The level is applied when the fleet is built, so a resolved scenario reloads to the same fleet."""
    scenario = _fleet(two_devices, "low")
    resolved = scenario.model_dump(mode="json")
    assert resolved["fleet"]["heterogeneity"] == "low" and resolved["fleet"]["groups"][0]["tiers"] == TIERS
    assert sc.validate(resolved).fleet.specs()[0].tiers == (1, 0.5)


BAD = {
    "untiered fleet": (None, "fleet.heterogeneity: no group of this fleet has tiers to keep 2, 3 or all of; give a "
                             "group capability tiers"),
    "too few tiers": ([1, 0.5, 0.25], "fleet.heterogeneity: fleet.groups.0 has 3 tiers; low, medium and high keep "
                                      "the first 2, 3 or all of them, so list at least 4"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_levels_without_enough_tiers_are_refused_in_one_line(case, two_devices, tmp_path, capsys):
    tiers, expected = BAD[case]
    two_devices["fleet"]["heterogeneity"] = "medium"
    if tiers:
        two_devices["fleet"]["groups"][0]["tiers"] = tiers
    file = write_yaml(tmp_path / "bad.yaml", two_devices)
    assert main(["validate", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {file}: {expected}") and err.count("\n") == 1, err


def test_an_unknown_level_names_the_choices(two_devices, tmp_path, capsys):
    file = write_yaml(tmp_path / "bad.yaml", two_devices)
    assert main(["validate", str(file), "--set", "fleet.heterogeneity=extreme"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {file}: fleet.heterogeneity: Input should be 'low', 'medium' or 'high'"), err
