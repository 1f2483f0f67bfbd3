"""The protocols' kit on the two-device scenario, against test_engine.py's hand-computed timelines:
    device 0: download 1.25 s, compute 1 s, upload 2.25 s;  device 1: download 1 s, compute 2 s, upload 1 s
(all exact in binary floating point); and the clock's vocabulary standing apart from simpy and the protocols."""
import math
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT

from testbed import scenario as sc
from testbed.errors import TestbedError
from testbed.protocols.kit import Kit
from testbed.protocols.stopping import StopRules


def kit_for(raw: dict) -> Kit:
    return Kit(sc.build(sc.validate(raw, "test", ROOT)), on_round=lambda row, events: None)


def test_the_clock_and_resources_import_neither_simpy_nor_the_protocols():
    code = ("import sys, testbed.clock, testbed.resources, testbed.algorithms.base as base; "
            "assert base.Timeline is testbed.clock.Timeline; "
            "print(sorted(m for m in sys.modules if m == 'simpy' or m.startswith('testbed.protocols')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_round_planned_at_once_and_a_task_cut_by_its_device_going_offline(two_devices, tmp_path):
    kit = kit_for(two_devices)
    start = kit.server.begin()
    assert (start.played, start.resumed, start.finished, start.protocol) == (0, False, False, {})
    tasks = {t.device: t for t in kit.participation.configure(start.state, 1, np.array([0, 1]), 2, np.array([0, 1]))}
    planned = kit.planner.plan_round(tasks, 1, 0.0)
    assert [p.start_s for p in planned[0].plan.phases] == [0, 1.25, 2.25] and planned[0].plan.end_s == 4.5
    assert [p.start_s for p in planned[1].plan.phases] == [0, 1, 3] and planned[1].plan.end_s == 4
    assert {d: (p.plan.outcome, p.battery_cut) for d, p in planned.items()} == {0: ("arrived", False),
                                                                               1: ("arrived", False)}
    # dispatched at 2 to a device online until 3.5: downloads over [2, 3.25], drops 0.25 s into its compute
    trace = tmp_path / "trace.csv"
    trace.write_text("device,start_s,end_s\na,0,3.5\n")
    two_devices["fleet"]["groups"][0]["availability"] = {"kind": "trace", "file": str(trace)}
    cut = kit_for(two_devices).planner.plan_round({0: tasks[0]}, 1, 2.0)[0]
    assert [(p.phase, p.start_s, p.end_s, p.completed) for p in cut.plan.phases] == [
        ("download", 2, 3.25, True), ("compute", 3.25, 3.5, False)]
    assert (cut.plan.outcome, cut.battery_cut, cut.timeline.seconds) == ("dropped", False, (1.25, 1.0, 2.25))


def test_who_is_usable_and_when_to_wake(two_devices, tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("device,start_s,end_s\na,0,1.5\na,10,1e9\n")  # device 0: offline over [1.5, 10)
    two_devices["fleet"]["groups"][0]["availability"] = {"kind": "trace", "file": str(trace)}
    who = kit_for(two_devices).availability
    online = who.online(2.0)
    assert online.tolist() == [False, True]
    assert who.usable(2.0, online).tolist() == [False, True]
    assert who.usable(2.0, online, busy=[1]).tolist() == [False, False]
    assert who.usable(1.0, who.online(1.0), busy=[1]).tolist() == [True, False]
    assert who.excluded(online, 2.0) == {}  # neither memory nor batteries are modelled
    assert who.census(2.0) == (1, {}) and who.census(1.0) == (2, {})
    assert who.next_wake(2.0) == 2.0               # device 1 can take a task now
    assert who.next_wake(2.0, busy=[1]) == 10.0    # the idle device 0 is back at 10
    assert who.next_wake(2.0, busy=[0, 1]) == math.inf


def test_configure_asks_the_strategy_and_only_dispatched_writes_the_history(two_devices):
    kit = kit_for(two_devices)
    picks = kit.participation
    tasks = picks.configure(kit.server.begin().state, 1, np.array([0, 1]), 2, np.array([1]))
    assert [t.device for t in tasks] == [1] and picks.history.selected.tolist() == [0, 0]
    picks.dispatched(tasks, 1)
    assert picks.history.selected.tolist() == [0, 1]


def test_stop_and_checkpoint_rules(two_devices):
    two_devices["stop"] = {"max_rounds": 5, "max_sim_time_s": 10, "target_accuracy": 0.5, "stop_at_target": True}
    two_devices["checkpoint"] = {"every_rounds": 3}
    kit = kit_for(two_devices)
    assert [kit.stop.is_last(r) for r in (4, 5)] == [False, True]
    assert [kit.stop.out_of_time(t) for t in (9.5, 10.0, 12.0)] == [False, True, True]
    assert [kit.stop.reached_target(s) for s in ({}, {"accuracy": 0.49}, {"accuracy": 0.5})] == [False, False, True]
    # a multiple of 3 passed since the last checkpoint (an async run may aggregate several times in an instant)
    assert [kit.stop.checkpoint_due(saved, r) for saved, r in ((2, 3), (3, 5), (1, 7), (5, 6), (6, 6))] == [
        True, False, True, True, False]
    two_devices["stop"] = {"max_rounds": 5, "target_accuracy": 0.5}  # the target is reported, not a stop
    loose = kit_for(two_devices)
    assert not loose.stop.reached_target({"accuracy": 0.9}) and not loose.stop.out_of_time(1e9)


def test_a_diverged_model_stops_the_run_in_one_line():
    StopRules.check_finite(3, {"train_loss": 0.7}, {})
    with pytest.raises(TestbedError, match="round 3: the model diverged \\(training loss nan\\)"):
        StopRules.check_finite(3, {"train_loss": math.nan}, {})
    with pytest.raises(TestbedError, match="round 4: the model diverged \\(test loss inf\\)"):
        StopRules.check_finite(4, {}, {"loss": math.inf})
