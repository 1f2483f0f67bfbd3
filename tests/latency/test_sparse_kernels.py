"""Sparse kernels on the latency clock (testbed/latency/clock.py): a profile's sparse_efficiency e times a masked
task (the whole model sent, fewer forward FLOPs counted) at min(dense, dense x kept share / e); none by default."""
import copy
import dataclasses

import pytest
from helpers import ROOT, TWO_DEVICES

from testbed import scenario as sc
from testbed.engine import Engine
from testbed.errors import TestbedError
from testbed.flops import forward_flops_per_sample
from testbed.latency.clock import FleetLatency, sparse_seconds
from testbed.payload import Dense


def test_sparse_seconds_by_hand():
    assert sparse_seconds(10.0, None, 25, 100) == 10.0      # no sparse kernels: the dense step
    assert sparse_seconds(10.0, 1.0, 25, 100) == 2.5        # ideal kernels: the kept share
    assert sparse_seconds(10.0, 0.5, 25, 100) == 5.0        # at half the dense rate
    assert sparse_seconds(10.0, 0.2, 25, 100) == 10.0       # slower than dense: the runtime runs dense
    assert sparse_seconds(10.0, 1.0, None, 100) == 10.0     # not a masked task
    assert sparse_seconds(10.0, 1.0, 100, 100) == 10.0


def _latency(groups_extra: dict, algorithm: str = "fedavg") -> dict:
    raw = copy.deepcopy(TWO_DEVICES) | {"compute": "latency", "algorithm": {"name": algorithm}}
    raw["fleet"]["groups"][0] |= groups_extra
    return raw


def test_a_masked_task_is_charged_its_kept_share_on_a_sparse_profile():
    exp = sc.build(sc.validate(_latency({"sparse_efficiency": 0.5}), "test", ROOT))
    clock = FleetLatency(exp, forward_flops_per_sample(exp.model, exp.dataset.train_x[:1]))
    n = int(exp.clients.num_samples[0])
    dense = _task(0, n)
    quarter = dataclasses.replace(dense, forward_flops=clock.forward_flops // 4)
    share = (clock.forward_flops // 4) / clock.forward_flops
    assert clock.seconds(quarter) == pytest.approx(clock.seconds(dense) * share / 0.5, rel=1e-12)
    other = dataclasses.replace(quarter, device=1, num_samples=int(exp.clients.num_samples[1]))
    assert clock.seconds(other) == clock.seconds(dataclasses.replace(other, forward_flops=None))  # no figure


def _task(device: int, n: int):
    from testbed.algorithms.base import Task
    return Task(device, 1, n, n, Dense(), Dense())


def _compute_phases(raw: dict) -> list[float]:
    events = []
    Engine(sc.build(sc.validate(raw, "test", ROOT)), lambda rec, ev: events.extend(ev)).run()
    return [e["end_s"] - e["start_s"] for e in events if e["phase"] == "compute"]


def test_fedlps_runs_faster_only_where_the_device_has_sparse_kernels():
    tiers = {"tiers": [0.25], "resample_tiers_each_round": True}
    dense = _compute_phases(_latency(tiers, "fedlps"))
    sparse = _compute_phases(_latency(tiers | {"sparse_efficiency": 1.0}, "fedlps"))
    assert len(dense) == len(sparse) == 4
    # device 0 (tier 1/4: FedLPS keeps a part of each layer) is faster, device 1 (no figure) is as dense
    assert sparse[0] < dense[0] and sparse[2] < dense[2] and sparse[1] == dense[1] and sparse[3] == dense[3]


def test_a_bad_sparse_efficiency_is_refused_in_one_line(tmp_path):
    with pytest.raises(TestbedError) as err:
        sc.validate(_latency({"sparse_efficiency": 1.5}), "test", ROOT)
    assert "sparse_efficiency" in str(err.value) and "\n" not in str(err.value)
    catalog = tmp_path / "mine.yaml"
    catalog.write_text("- {name: board, peak_flops: 1.0e+10, peak_flops_source: sheet, efficiency: 0.5, "
                       "efficiency_source: assumed, up_Bps: 1.0e+6, up_Bps_source: assumed, down_Bps: 1.0e+6, "
                       "down_Bps_source: assumed, latency_s: 0.01, latency_s_source: assumed, "
                       "sparse_efficiency: 0, sparse_efficiency_source: assumed}\n")
    raw = _latency({})
    raw["fleet"] = {"catalog": str(catalog), "groups": [{"profile": "board", "count": 2}]}
    with pytest.raises(TestbedError, match=r"sparse_efficiency must be a number in \(0, 1\], got 0"):
        sc.validate(raw, "test", ROOT)
