"""Degenerate fleets run (they are legitimate experiments) but are never silent: one warning line with the count
of rounds that trained nothing or waited for devices, and summary.json's degenerate_rounds."""
import json

from helpers import write_yaml

from testbed.cli import main


def test_a_deadline_nobody_meets_and_a_fleet_offline_at_the_start(two_devices, tmp_path, capsys):
    # both devices' downloads alone take longer than 0.2 s (latency 0.25 s and 0.5 s): every round ends late
    two_devices["round"] |= {"deadline_s": 0.2}
    two_devices["stop"] = {"max_rounds": 3}
    # device 0 comes online at 5 s (and device 1 at 7 s): the first round waits for it, the others do not
    trace = tmp_path / "trace.csv"
    trace.write_text("device,start_s,end_s\n0,5,1000\n1,7,1000\n")
    for group in two_devices["fleet"]["groups"]:
        group["availability"] = {"kind": "trace", "file": str(trace)}
    assert main(["run", str(write_yaml(tmp_path / "s.yaml", two_devices)), "--out", str(tmp_path), "--quiet"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: 3 rounds, of which 3 where no selected device met round.deadline_s (0.2 s); "
                        "1 that waited for a device to come online (summary.json: degenerate_rounds)"]
    summary = json.loads((tmp_path / "two_devices" / "0" / "summary.json").read_text())
    assert summary["degenerate_rounds"] == {"rounds_all_late": 3, "rounds_waiting_for_devices": 1}


def test_a_healthy_run_says_nothing(two_devices, tmp_path, capsys):
    assert main(["run", str(write_yaml(tmp_path / "s.yaml", two_devices)), "--out", str(tmp_path), "--quiet"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "degenerate_rounds" not in json.loads((tmp_path / "two_devices" / "0" / "summary.json").read_text())


def _run_on_trace(two_devices, tmp_path, capsys, trace_rows: str, protocol: dict | None = None, **stop):
    """The two devices (3 rounds, and `stop`'s other keys) on a trace file of these rows: the warning lines, and
    summary.json."""
    trace = tmp_path / "trace.csv"
    trace.write_text("device,start_s,end_s\n" + trace_rows)
    for group in two_devices["fleet"]["groups"]:
        group["availability"] = {"kind": "trace", "file": "trace.csv"}
    two_devices["stop"] = {"max_rounds": 3, **stop}
    if protocol:
        two_devices["protocol"] = protocol
    assert main(["run", str(write_yaml(tmp_path / "s.yaml", two_devices)), "--out", str(tmp_path), "--quiet"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    return warnings, json.loads((tmp_path / "two_devices" / "0" / "summary.json").read_text())


def test_a_trace_of_zero_length_intervals_runs_no_round_and_says_so(two_devices, tmp_path, capsys):
    warnings, summary = _run_on_trace(two_devices, tmp_path, capsys, "0,5,5\n1,7,7\n")
    why = f"no device is online from then on: {tmp_path / 'trace.csv'} (fleet.groups.0,1.availability.file) has " \
          "no interval of positive length"
    assert warnings == [f"warning: the run ended after 0 of 3 rounds, at 0 s: {why} (summary.json: ended_early)"]
    assert summary["status"] == "completed" and summary["rounds"] == 0
    assert summary["ended_early"] == {"at_s": 0, "why": why}


def test_a_trace_that_ends_mid_run_ends_the_run_there_and_says_so(two_devices, tmp_path, capsys):
    # round 1 takes 4.5 s (test_engine.py's timelines); round 2 starts at 4.5 s and both devices go offline at 6 s
    # mid-task: it trains nothing, and nobody is online for round 3
    warnings, summary = _run_on_trace(two_devices, tmp_path, capsys, "0,0,6\n1,0,6\n")
    why = f"no device is online from then on: {tmp_path / 'trace.csv'} (fleet.groups.0,1.availability.file): its " \
          "last interval ends at 6 s"
    assert warnings == [f"warning: the run ended after 2 of 3 rounds, at 6 s: {why}; 2 rounds, of which 1 where "
                        "every selected device went offline (summary.json: degenerate_rounds and ended_early)"]
    assert summary["rounds"] == 2 and summary["ended_early"] == {"at_s": 6.0, "why": why}
    assert summary["degenerate_rounds"] == {"rounds_all_dropped": 1}


def test_an_asynchronous_run_on_a_dead_trace_says_so_too(two_devices, tmp_path, capsys):
    two_devices.pop("round")
    warnings, summary = _run_on_trace(two_devices, tmp_path, capsys, "0,5,5\n1,7,7\n",
                                      {"kind": "async", "concurrency": 2, "buffer_size": 1})
    assert len(warnings) == 1 and "has no interval of positive length" in warnings[0]
    assert summary["rounds"] == 0 and summary["ended_early"]["at_s"] == 0


def test_batteries_that_empty_for_good_end_the_run_and_say_so(two_devices, tmp_path, capsys):
    # 0.001 Wh at half charge, never charged: both batteries empty during round 1's tasks (test_resources.py)
    for group in two_devices["fleet"]["groups"]:
        group["battery"] = {"capacity_Wh": 0.001, "initial_level": 0.5, "min_level": 0.1}
    two_devices["stop"] = {"max_rounds": 3}
    assert main(["run", str(write_yaml(tmp_path / "s.yaml", two_devices)), "--out", str(tmp_path), "--quiet"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    summary = json.loads((tmp_path / "two_devices" / "0" / "summary.json").read_text())
    why = "every device online now or later has too little battery or memory for a task " \
          "(resources, fleet.groups.N.battery)"
    assert summary["rounds"] == 1 and summary["ended_early"]["why"] == why
    assert summary["degenerate_rounds"] == {"rounds_all_dropped": 1}
    assert len(warnings) == 1 and warnings[0].startswith("warning: the run ended after 1 of 3 rounds, at ")
    assert why in warnings[0]


def test_a_fleet_that_comes_online_only_after_the_time_limit_starts_no_round_after_it(two_devices, tmp_path, capsys):
    # round 1 takes 4.5 s (test_engine.py's timelines) from 0 s; device 0 is offline from 6 s to 100 s, device 1
    # from 6 s on: round 2 (4.5 s to 9 s) drops both, and round 3 would wait until 100 s, past the 50 s limit
    warnings, summary = _run_on_trace(two_devices, tmp_path, capsys, "0,0,6\n0,100,1000\n1,0,6\n", max_sim_time_s=50)
    why = "no device could take a task before stop.max_sim_time_s (50 s): the first can at 100 s"
    assert summary["rounds"] == 2 and summary["ended_early"] == {"at_s": 50.0, "why": why}
    assert warnings == [f"warning: the run ended after 2 of 3 rounds, at 50 s: {why}; 2 rounds, of which 1 where "
                        "every selected device went offline (summary.json: degenerate_rounds and ended_early)"]
