"""compute: latency in a run: its compute phases are step_time x steps, and compute: flops stays as it was."""
import copy

import pytest

from helpers import ROOT, TWO_DEVICES, simulate
from testbed import scenario as sc
from testbed.engine import Engine
from testbed.errors import TestbedError
from testbed.latency.clock import StepClock
from testbed.local import LocalSGD


def latency_scenario() -> dict:
    raw = copy.deepcopy(TWO_DEVICES) | {"compute": "latency", "stop": {"max_rounds": 2}}
    raw["client"] = {"lr": 0.05, "local_epochs": 2, "batch_size": 32}
    return raw


def test_compute_phases_equal_the_predicted_steps():
    raw = latency_scenario()
    exp = sc.build(sc.validate(raw, "test", ROOT))
    events = []
    Engine(exp, lambda rec, ev: events.extend(ev)).run()
    clock = StepClock(exp.model, exp.dataset.train_x[:1], LocalSGD(lr=0.05, local_epochs=2, batch_size=32))
    computes = [e for e in events if e["phase"] == "compute"]
    assert len(computes) == 4
    for e in computes:
        d = e["device"]
        n = int(exp.clients.num_samples[d])
        batches = LocalSGD(lr=0.05, local_epochs=2, batch_size=32).batch_sizes(n)
        assert n % 32 and batches[-1] == n % 32          # the last short batch is there, and timed at its size
        profile = exp.fleet.groups[int(exp.fleet.group[d])].profile
        predicted = sum(clock.step_seconds(profile, b) for b in batches)
        assert e["end_s"] - e["start_s"] == pytest.approx(predicted, rel=1e-9)


def test_flops_is_the_default_and_stays_out_of_the_resolved_scenario():
    s = sc.validate(copy.deepcopy(TWO_DEVICES), "test", ROOT)
    assert s.compute == "flops" and "compute" not in s.model_dump(mode="json")
    latency = sc.validate(latency_scenario(), "test", ROOT)
    assert latency.model_dump(mode="json")["compute"] == "latency"


def test_the_flop_clock_is_untouched_by_the_latency_code():
    flops_records, flops_events = simulate(copy.deepcopy(TWO_DEVICES))
    raw = latency_scenario() | {"client": TWO_DEVICES["client"], "compute": "flops"}
    again_records, again_events = simulate(raw)
    assert again_events == flops_events and again_records == flops_records


def test_a_profile_without_roofline_figures_or_calibration_is_refused(tmp_path):
    catalog = tmp_path / "mine.yaml"
    catalog.write_text("- {name: board, peak_flops: 1.0e+10, peak_flops_source: sheet, efficiency: 0.5, "
                       "efficiency_source: assumed, up_Bps: 1.0e+6, up_Bps_source: assumed, down_Bps: 1.0e+6, "
                       "down_Bps_source: assumed, latency_s: 0.01, latency_s_source: assumed}\n")
    raw = latency_scenario()
    raw["fleet"] = {"catalog": str(catalog), "groups": [{"profile": "board", "count": 2}]}
    with pytest.raises(TestbedError) as err:
        sc.validate(raw, "test", ROOT)
    assert "fleet.groups.0.profile: board has no memory_Bps for compute: latency" in str(err.value)
    assert "testbed calibrate" in str(err.value)
