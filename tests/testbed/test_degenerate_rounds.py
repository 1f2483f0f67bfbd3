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
