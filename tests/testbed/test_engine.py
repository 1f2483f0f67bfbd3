"""The simulated clock, checked against timelines computed by hand.

cnn_fedlps has 21,840 parameters (87,360 bytes in fp32) and 480,500 forward multiply-adds per sample.
Each of the two devices holds 2,000 digits (IID halves of 4,000), one local epoch:
    FLOPs = 3 x 480,500 x 2,000 = 2,883,000,000 multiply-adds = 5.766e9 FLOP.
Device 0: 5.766e9 FLOP/s, down 87,360 B/s, up 43,680 B/s, latency 0.25 s
    download 0.25 + 1 = 1.25 s, compute 1 s, upload 0.25 + 2 = 2.25 s  -> [0, 1.25] [1.25, 2.25] [2.25, 4.5]
Device 1: 2.883e9 FLOP/s, down 174,720 B/s, up 174,720 B/s, latency 0.5 s
    download 0.5 + 0.5 = 1 s, compute 2 s, upload 0.5 + 0.5 = 1 s      -> [0, 1] [1, 3] [3, 4]
(All these numbers are exact in binary floating point, so ties at the deadline are exact too.)
"""
import pytest
from helpers import simulate

FLOPS = 2_883_000_000
MODEL_BYTES = 87_360
US = 1e-6  # timestamps are checked to the microsecond


def _phases(events, round_):
    return {(e["device"], e["phase"]): (e["start_s"], e["end_s"], e["outcome"]) for e in events
            if e["round"] == round_}


def _check(phases, expected):
    assert set(phases) == set(expected)
    for key, (start, end, outcome) in expected.items():
        got = phases[key]
        assert got[0] == pytest.approx(start, abs=US) and got[1] == pytest.approx(end, abs=US), key
        assert got[2] == outcome, key


def test_two_device_timeline_by_hand(two_devices):
    records, events = simulate(two_devices)
    _check(_phases(events, 1), {
        (0, "download"): (0, 1.25, "done"), (0, "compute"): (1.25, 2.25, "done"), (0, "upload"): (2.25, 4.5, "done"),
        (1, "download"): (0, 1, "done"), (1, "compute"): (1, 3, "done"), (1, "upload"): (3, 4, "done"),
    })
    first, second = records
    assert first["t_start_s"] == 0 and first["t_end_s"] == pytest.approx(4.5, abs=US)
    assert second["t_start_s"] == pytest.approx(4.5, abs=US) and second["t_end_s"] == pytest.approx(9.0, abs=US)
    assert (first["selected"], first["arrived"], first["dropped"]) == (2, 2, 0)
    assert first["bytes_down"] == 2 * MODEL_BYTES and first["bytes_up"] == 2 * MODEL_BYTES
    assert first["flops"] == 2 * FLOPS and first["wasted_flops"] == 0
    assert 0 < first["accuracy"] <= 1 and first["loss"] > 0


def test_device_offline_mid_compute_drops_at_that_instant(two_devices, tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("device,start_s,end_s\na,0,1.5\na,10,1e9\n")  # device 0: offline over [1.5, 10)
    two_devices["fleet"]["groups"][0]["availability"] = {"kind": "trace", "file": str(trace)}
    records, events = simulate(two_devices)
    _check(_phases(events, 1), {
        (0, "download"): (0, 1.25, "dropped"), (0, "compute"): (1.25, 1.5, "dropped"),
        (1, "download"): (0, 1, "done"), (1, "compute"): (1, 3, "done"), (1, "upload"): (3, 4, "done"),
    })
    first, second = records
    assert (first["arrived"], first["dropped"], first["t_end_s"]) == (1, 1, 4.0)
    # the dropped device downloaded the model and computed 0.25 of its 1 s before vanishing
    assert first["wasted_flops"] == FLOPS // 4
    assert first["wasted_bytes"] == MODEL_BYTES
    assert first["flops"] == FLOPS + first["wasted_flops"]
    # round 2 starts at 4 while device 0 is offline until t = 10: only device 1 is selected
    assert (second["online"], second["selected"]) == (1, 1)
    assert {e["device"] for e in events if e["round"] == 2} == {1}


def test_overcommit_keeps_the_first_k_arrivals(two_devices):
    two_devices["round"] = {"clients_per_round": 1, "overcommit": 2.0}
    records, events = simulate(two_devices)
    # device 1 lands at 4; device 0 is cut then, mid-upload
    _check(_phases(events, 1), {
        (0, "download"): (0, 1.25, "surplus"), (0, "compute"): (1.25, 2.25, "surplus"),
        (0, "upload"): (2.25, 4, "surplus"),
        (1, "download"): (0, 1, "done"), (1, "compute"): (1, 3, "done"), (1, "upload"): (3, 4, "done"),
    })
    first = records[0]
    assert (first["selected"], first["arrived"], first["surplus"]) == (2, 1, 1)
    # device 0 sent (4 - 2.25 - 0.25) s x 43,680 B/s = 65,520 bytes of its upload before it was cut
    assert first["bytes_up"] == MODEL_BYTES + 65_520
    assert first["wasted_bytes"] == MODEL_BYTES + 65_520
    assert first["wasted_flops"] == FLOPS


def test_deadline_cuts_the_round(two_devices):
    two_devices["round"] = {"clients_per_round": 2, "deadline_s": 4.2}
    records, events = simulate(two_devices)
    phases = _phases(events, 1)
    assert phases[(1, "upload")][2] == "done"
    assert phases[(0, "upload")][1] == 4.2 and phases[(0, "upload")][2] == "late"
    assert (records[0]["arrived"], records[0]["late"], records[0]["t_end_s"]) == (1, 1, 4.2)
    assert records[1]["t_start_s"] == 4.2


def test_deadline_before_anyone_arrives_leaves_the_model_unchanged(two_devices):
    two_devices["round"] = {"clients_per_round": 2, "deadline_s": 3.5}
    two_devices["stop"] = {"max_rounds": 2}
    records, _ = simulate(two_devices)
    assert [r["arrived"] for r in records] == [0, 0] and [r["late"] for r in records] == [2, 2]
    assert records[0]["accuracy"] == records[1]["accuracy"]
    assert records[1]["t_end_s"] == 7.0


def test_arrival_exactly_at_the_deadline_counts(two_devices):
    two_devices["round"] = {"clients_per_round": 2, "deadline_s": 4.0}
    records, _ = simulate(two_devices)
    assert (records[0]["arrived"], records[0]["late"]) == (1, 1)


def test_fleet_all_offline_waits_for_the_first_device(two_devices):
    # both devices sleep until 01:00 (3,600 s), then stay on until 05:00
    for group in two_devices["fleet"]["groups"]:
        group["availability"] = {"kind": "diurnal", "on_hour": 1, "off_hour": 5, "jitter_s": 0}
    records, events = simulate(two_devices)
    assert records[0]["t_start_s"] == 3600 and records[0]["t_end_s"] == 3604.5
    assert min(e["start_s"] for e in events) == 3600


def test_fedscale_trace_through_the_scenario(two_devices, tmp_path):
    """FedScale's client_behave_trace format: client 0 is online on [0, 1.5) and the trace repeats every 100 s."""
    import json

    trace = tmp_path / "behave.json"
    trace.write_text(json.dumps({"0": {"active": [0], "inactive": [1.5], "finish_time": 100}}))
    two_devices["fleet"]["groups"][0]["availability"] = {"kind": "trace", "file": str(trace), "format": "fedscale"}
    records, events = simulate(two_devices)
    assert _phases(events, 1)[(0, "compute")] == (1.25, 1.5, "dropped")
    assert records[1]["online"] == 1  # at t = 4 device 0 is away until t = 100


def test_a_round_without_tasks_closes_at_once():
    from testbed.protocols.sync import play_round

    play = play_round(0.0, {}, clients_per_round=3, deadline_s=None)
    assert (play.t_end, play.used, play.cut, play.phases) == (0, [], {}, [])


@pytest.mark.slow
def test_stop_rules_and_evaluation_schedule(two_devices):
    two_devices["stop"] = {"max_rounds": 5, "max_sim_time_s": 5.0}  # rounds start at 0 and 4.5, not at 9
    assert [r["t_start_s"] for r in simulate(two_devices)[0]] == [0, 4.5]
    two_devices["stop"] = {"max_rounds": 3}
    two_devices["eval"] = {"every_rounds": 2}  # and always after the last round
    accuracy = [r["accuracy"] for r in simulate(two_devices)[0]]
    assert accuracy[0] != accuracy[0] and accuracy[1] > 0 and accuracy[2] > 0  # NaN: not evaluated
    two_devices["eval"] = {"every_rounds": 1}
    two_devices["stop"] = {"max_rounds": 5, "target_accuracy": 0.01, "stop_at_target": True}
    assert len(simulate(two_devices)[0]) == 1


def test_submodel_tasks_cost_their_own_flops_and_bytes(two_devices):
    """A strategy that hands each device half of FedLPS's CNN (ordered units, ratio 0.5): the clock and the
    tables charge the submodel's FLOPs and the masked payload, and the ratio reaches events.csv."""
    from dataclasses import dataclass, replace

    from testbed import scenario as sc
    from testbed.algorithms import FedAvg
    from testbed.engine import Engine
    from testbed.models.units import prunable_layers
    from testbed.payload import UnitMasked
    from testbed.submodel import unit_masks

    exp = sc.build(sc.validate(two_devices, "test"))
    params = dict(exp.model.named_parameters())
    masks = unit_masks(params, prunable_layers(exp.model), 0.5, "ordered")
    forward = 240_000  # any submodel count: the engine must use it instead of the model's 480,500

    @dataclass(frozen=True)
    class Half(FedAvg):
        def configure(self, state, ctx, rng):
            return [replace(t, ratio=0.5, forward_flops=forward, up=UnitMasked(masks))
                    for t in super().configure(state, ctx, rng)]

    exp.strategy = Half(exp.strategy.client)
    records, events = [], []
    Engine(exp, lambda rec, ev: (records.append(rec), events.extend(ev))).run()
    # conv1 10 -> 5 units (2 bytes of pattern + 5 x 25 x 4), conv2 20 -> 10 (3 + 10 x 250 x 4),
    # fc1 50 -> 25 (7 + 25 x 320 x 4); biases and fc2 dense: 40 + 80 + 200 + 2,000 + 40
    masked_bytes = 502 + 10_003 + 32_007 + 40 + 80 + 200 + 2_000 + 40
    assert records[0]["bytes_up"] == 2 * masked_bytes == 2 * 44_872
    assert records[0]["flops"] == 2 * 3 * forward * 2000
    assert {e["ratio"] for e in events} == {0.5}
    # upload of device 0: 0.25 s latency + 44,872 B / 43,680 B/s
    upload = next(e for e in events if e["device"] == 0 and e["phase"] == "upload" and e["round"] == 1)
    assert upload["end_s"] - upload["start_s"] == pytest.approx(0.25 + 44_872 / 43_680, abs=US)
