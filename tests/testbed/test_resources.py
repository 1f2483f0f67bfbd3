"""Resources on the clock, checked against numbers computed by hand on the two-device scenario (test_engine.py):

Device 0: download [0, 1.25], compute [1.25, 2.25], upload [2.25, 4.5]: 1 s of compute is 5.766e9 FLOP
Device 1: download [0, 1],    compute [1, 3],       upload [3, 4]: the upload's 87,360 bytes flow from 3.5 s
Every duration and watt below is exact in binary floating point, so energies compare exactly.
"""
import math
import re

import pandas as pd
import pytest
from helpers import simulate, tiny_blobs, tiny_scenario, write_yaml

import testbed.data
from testbed import scenario as sc
from testbed.cli import main
from testbed.runner import run_scenario

US, UJ = 1e-6, 1e-6  # to the microsecond, to the microjoule
WATTS = ({"train_W": 2.0, "up_W": 1.5, "down_W": 0.75, "idle_W": 0.25},
         {"train_W": 3.0, "up_W": 1.0, "down_W": 0.5, "idle_W": 0.5})


def _powered(raw, idle=False):
    for group, watts in zip(raw["fleet"]["groups"], WATTS):
        group.update(watts)
    raw["resources"] = {"energy": True, "idle_energy": idle}
    return raw


def _phases(events, round_=1):
    return {(e["device"], e["phase"]): e for e in events if e["round"] == round_}


def test_energy_of_each_phase_and_the_total_by_hand(two_devices):
    records, events = simulate(_powered(two_devices, idle=True))
    got = {key: e["energy_J"] for key, e in _phases(events).items()}
    # device 0: 1.25 s x 0.75 W, 1 s x 2 W, 2.25 s x 1.5 W; device 1: 1 s x 0.5 W, 2 s x 3 W, 1 s x 1 W, and it
    # waits for device 0 from 4 s to the round's close at 4.5 s at 0.5 W
    expected = {(0, "download"): 0.9375, (0, "compute"): 2.0, (0, "upload"): 3.375,
                (1, "download"): 0.5, (1, "compute"): 6.0, (1, "upload"): 1.0, (1, "idle"): 0.25}
    assert got.keys() == expected.keys()
    for key, joules in expected.items():
        assert got[key] == pytest.approx(joules, abs=UJ), key
    assert records[0]["energy_J"] == pytest.approx(14.0625, abs=UJ) and records[0]["wasted_energy_J"] == 0
    assert sum(r["energy_J"] for r in records) == pytest.approx(2 * 14.0625, abs=UJ)  # round 2 repeats round 1


def test_without_idle_energy_the_waiting_costs_nothing_and_has_no_row(two_devices):
    records, events = simulate(_powered(two_devices))
    assert "idle" not in {e["phase"] for e in events}
    assert records[0]["energy_J"] == pytest.approx(13.8125, abs=UJ)


def test_summary_total_is_the_sum_of_the_phases_exactly(two_devices, tmp_path):
    raw = _powered(two_devices, idle=True) | {"stop": {"max_rounds": 2, "target_accuracy": 0.05}}
    run, summary = run_scenario(sc.validate(raw, "test"), "test", tmp_path, quiet=True)
    with open(run / "events.csv") as f:
        phases = [float(line.rsplit(",", 1)[1]) for line in f.read().splitlines()[1:]]
    assert summary["energy_J_total"] == math.fsum(phases)
    assert summary["energy_J_total"] == pytest.approx(28.125, abs=UJ)
    # the target is reached at the first evaluation: round 1, whose energy is 14.0625 J
    assert summary["energy_to_accuracy_J"] == {"0.05": pytest.approx(14.0625, abs=UJ)}
    rounds = pd.read_csv(run / "rounds.csv")
    assert rounds["energy_J"].tolist() == pytest.approx([14.0625, 14.0625], abs=UJ)


def test_a_battery_that_empties_inside_compute_drops_the_task_then(two_devices):
    # device 0 holds 0.001 Wh x 0.5 = 1.8 J: its download takes 0.9375 J, leaving 0.8625 J for 2 W of compute,
    # which empties the battery 0.43125 s into compute, at 1.25 + 0.43125 = 1.68125 s
    raw = _powered(two_devices)
    raw["fleet"]["groups"][0]["battery"] = {"capacity_Wh": 0.001, "initial_level": 0.5, "min_level": 0.1}
    records, events = simulate(raw)
    compute = _phases(events)[(0, "compute")]
    assert compute["end_s"] == pytest.approx(1.68125, abs=US) and compute["outcome"] == "dropped"
    assert compute["energy_J"] == pytest.approx(0.8625, abs=UJ)
    first, second = records
    assert (first["dropped"], first["depleted"], first["excluded_battery"]) == (1, 1, 0)
    assert first["wasted_energy_J"] == pytest.approx(1.8, abs=UJ)  # everything the battery held
    # empty, and never charged: device 0 refuses round 2
    assert (second["online"], second["excluded_battery"], second["selected"]) == (2, 1, 1)
    battery = [row for r in records for row in r["battery"]]
    assert [b["level_min"] for b in battery] == [0.0, 0.0] and [b["below_min"] for b in battery] == [1, 1]


def test_a_charging_window_brings_a_device_back_at_the_instant_it_reaches_its_minimum(two_devices):
    # device 0 alone, empty at 0; plugged in from 0.001 h = 3.6 s at 1 W; it may work once it holds 0.5 x 3.6 J:
    # 1.8 s of charging later, at 5.4 s, when the first round starts (the round waits for it)
    raw = _powered(two_devices)
    raw["fleet"]["groups"] = raw["fleet"]["groups"][:1]
    raw["fleet"]["groups"][0]["battery"] = {
        "capacity_Wh": 0.001, "initial_level": 0.0, "min_level": 0.5, "charge_W": 1.0,
        "charging": {"kind": "diurnal", "on_hour": 0.001, "off_hour": 1.0, "jitter_s": 0}}
    raw["round"] = {"clients_per_round": 1}
    records, events = simulate(raw)
    assert records[0]["t_start_s"] == pytest.approx(5.4, abs=US)
    # alone, it trains on all 4,000 digits: compute takes 2 s. Still plugged in (until 3600 s), it gains 1 - 0.75 W
    # over the 1.25 s download (2.1125 J), loses 2 - 1 W over the 2 s of compute (0.1125 J), then 1.5 - 1 W during
    # the upload from 8.65 s: empty 0.225 s into it, at 8.875 s
    upload = _phases(events)[(0, "upload")]
    assert upload["outcome"] == "dropped" and upload["end_s"] == pytest.approx(8.875, abs=US)
    assert upload["energy_J"] == pytest.approx(0.225 * 1.5, abs=UJ)
    assert records[0]["depleted"] == 1
    # empty again, it charges back to 1.8 J in 1.8 s: round 2 starts at 10.675 s
    assert records[1]["t_start_s"] == pytest.approx(10.675, abs=US)


def test_an_ineligible_device_is_never_selected_and_is_counted(two_devices):
    raw = two_devices
    raw["fleet"]["groups"][0]["memory_MB"] = 0.01  # 10 KB: cnn_fedlps alone is 85 KB
    raw["fleet"]["groups"][1]["memory_MB"] = 64
    records, events = simulate(raw)
    assert {e["device"] for e in events} == {1}
    assert [r["excluded_memory"] for r in records] == [1, 1] and [r["online"] for r in records] == [2, 2]


def test_a_fleet_where_nothing_fits_ends_in_one_line_before_any_folder(two_devices, tmp_path, capsys):
    for group in two_devices["fleet"]["groups"]:
        group["memory_MB"] = 0.01
    file = write_yaml(tmp_path / "tight.yaml", two_devices)
    assert main(["run", str(file), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not (tmp_path / "runs").exists(), err
    assert re.match(rf"error: {file}: fleet: no device has the memory for one training task: it needs [0-9.]+ MB "
                    r"\(cnn_fedlps, batch 200, LocalSGD\); the smallest device \(raspberry_pi_4, fleet.groups.0\) "
                    r"has 0.0 MB", err), err


def test_submodel_ratios_are_capped_by_what_fits(monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    from testbed.memory import TrainingMemory

    raw = tiny_scenario({"name": "heterofl"}, rounds=3)
    exp = sc.build(sc.validate(raw, "test"))
    memory = TrainingMemory(exp.model, exp.dataset.train_x[:1], exp.strategy.client)
    half = memory.footprint(0.5).total
    raw["fleet"]["groups"][0]["memory_MB"] = half / 2**20  # device 0 holds exactly half the model
    raw["fleet"]["groups"][1]["memory_MB"] = 1024
    records, events = simulate(raw)
    ratios = pd.DataFrame(events).groupby("device")["ratio"].max()
    assert ratios[0] <= 0.5 and ratios[1] == 1.0
    assert memory.max_fitting_ratio(half) == 0.5


def test_throttled_compute_across_two_rate_changes_and_a_link_across_a_trace_step(two_devices, tmp_path):
    # device 0 computes 1 s of work from 1.25 s: 0.25 s at 1x (a quarter), 0.5 s at 0.5x (a quarter), then the
    # last half at 0.25x takes 2 s: compute ends at 4 s, the upload (2.25 s, steady link) at 6.25 s
    speed = tmp_path / "speed.csv"
    speed.write_text("device,t_s,factor\n0,0,1\n0,1.5,0.5\n0,2,0.25\n")
    # device 1's upload flows from 3.5 s at 174,720 B/s: 0.25 s moves 43,680 bytes, then at 0.5x the other 43,680
    # take 0.5 s: the upload ends at 4.25 s
    link = tmp_path / "link.csv"
    link.write_text("device,t_s,factor\n0,0,1\n0,3.75,0.5\n")
    two_devices["fleet"]["groups"][0]["speed"] = {"kind": "trace", "file": str(speed)}
    two_devices["fleet"]["groups"][1]["bandwidth"] = {"kind": "trace", "file": str(link)}
    two_devices["stop"] = {"max_rounds": 1}
    records, events = simulate(two_devices)
    phases = _phases(events)
    assert phases[(0, "compute")]["end_s"] == pytest.approx(4.0, abs=US)
    assert phases[(0, "upload")]["end_s"] == pytest.approx(6.25, abs=US)
    assert phases[(1, "download")]["end_s"] == pytest.approx(1.0, abs=US)
    assert phases[(1, "upload")]["end_s"] == pytest.approx(4.25, abs=US)
    assert records[0]["t_end_s"] == pytest.approx(6.25, abs=US)


def test_a_throttled_task_cut_by_the_deadline_did_the_integral_of_its_rate(two_devices, tmp_path):
    speed = tmp_path / "speed.csv"
    speed.write_text("device,t_s,factor\n0,0,1\n0,1.5,0.5\n0,2,0.25\n")
    two_devices["fleet"]["groups"][0]["speed"] = {"kind": "trace", "file": str(speed)}
    two_devices["round"]["deadline_s"] = 3.0
    two_devices["stop"] = {"max_rounds": 1}
    records, _ = simulate(two_devices)
    # cut at 3 s: device 0 did 0.25 + 0.25 + 1 s x 0.25 = 0.75 of its 2,883,000,000 multiply-adds; device 1, about
    # to upload, all of its own
    assert records[0]["wasted_flops"] == 2_883_000_000 * 3 // 4 + 2_883_000_000


def test_everything_off_gives_no_new_columns(two_devices):
    records, events = simulate(two_devices)
    assert "energy_J" not in records[0] and "energy_J" not in events[0] and "battery" not in records[0]


BAD = {
    "negative watts": (lambda g, tmp: g.update(train_W=-1.0), "fleet.groups.0.train_W: Input should be greater than "
                                                              "or equal to 0"),
    "battery above capacity": (lambda g, tmp: g.update(battery={"capacity_Wh": 1, "initial_level": 1.5}),
                               "fleet.groups.0.battery.initial_level"),
    "decreasing trace times": (lambda g, tmp: g.update(speed={"kind": "trace", "file": _trace(tmp, "0,0,1\n0,5,1\n0,3,2\n")}),
                               "times must increase"),
    "factor zero": (lambda g, tmp: g.update(bandwidth={"kind": "trace", "file": _trace(tmp, "0,0,1\n0,5,0\n")}),
                    "factor must be > 0"),
    "markov factor negative": (lambda g, tmp: g.update(speed={"kind": "markov", "factor": -0.5, "mean_normal_s": 1,
                                                               "mean_slow_s": 1}),
                               "fleet.groups.0.speed.markov.factor: Input should be greater than 0"),
}


def _trace(tmp, rows):
    path = tmp / "trace.csv"
    path.write_text("device,t_s,factor\n" + rows)
    return str(path)


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_resource_input_gives_one_line_and_exit_2(case, two_devices, tmp_path, capsys):
    mutate, expected = BAD[case]
    mutate(two_devices["fleet"]["groups"][0], tmp_path)
    file = write_yaml(tmp_path / "bad.yaml", two_devices)
    assert main(["run", str(file), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert expected in err and "fleet.groups.0" in err, err


def test_summary_says_how_big_the_task_is_and_how_many_devices_cannot_hold_it(two_devices, tmp_path):
    from testbed.memory import TrainingMemory

    two_devices["fleet"]["groups"][0]["memory_MB"] = 0.01
    two_devices["fleet"]["groups"][1]["memory_MB"] = 64
    scenario = sc.validate(two_devices, "test")
    exp = sc.build(scenario)
    footprint = TrainingMemory(exp.model, exp.dataset.train_x[:1], exp.strategy.client).footprint().total
    _, summary = run_scenario(scenario, "test", tmp_path, quiet=True)
    assert summary["memory_footprint_MB"] == footprint / 2**20
    assert (summary["memory_unfit_devices"], summary["memory_capped_devices"]) == (1, 0)
    assert summary["excluded_memory_total"] == 2  # device 0, online in both rounds


@pytest.mark.parametrize("start, factor", [("slow", 0.5), ("normal", 1.0)])
def test_a_markov_slowdown_starts_where_the_scenario_says(two_devices, start, factor):
    two_devices["fleet"]["groups"][0]["speed"] = {"kind": "markov", "factor": 0.5, "mean_normal_s": 5,
                                                  "mean_slow_s": 3, "start": start}
    fleet = sc.build(sc.validate(two_devices, "test")).fleet
    assert fleet.speed.factor_at(0, 0.0) == factor and fleet.speed.factor_at(1, 0.0) == 1.0
