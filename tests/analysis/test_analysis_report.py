import pandas as pd
import pytest

from analysis.report import format_table, tta_table, write_report
from analysis.runs import load_run


@pytest.fixture
def slower_run_dir(tmp_path, make_run, rounds_csv):
    """Seed 1 of the tiny run: reaches 0.8 only in its last round, at 60 s."""
    slower = rounds_csv.replace("0.81,0.7", "0.6,0.9").replace("0.79,0.75", "0.85,0.5")
    return make_run(tmp_path / "runs" / "tiny" / "1", rounds=slower, seed=1)


def test_tta_table_one_row_per_run(run_dir, slower_run_dir):
    table = tta_table([load_run(run_dir), load_run(slower_run_dir)], [0.4, 0.8, 0.9])
    assert list(table["run"]) == ["tiny/0", "tiny/1"]
    first, second = table.iloc[0], table.iloc[1]
    assert (first["rounds"], first["sim_time_s"], first["final_accuracy"], first["best_accuracy"]) == (
        5, 60.0, 0.79, 0.81)
    assert (first["time_s@0.8"], first["uplink_MB@0.8"], first["rounds@0.8"]) == (52.5, 0.011, 4)
    assert (second["time_s@0.8"], second["rounds@0.8"]) == (60.0, 5)
    assert pd.isna(first["time_s@0.9"]) and pd.isna(first["rounds@0.9"]) and pd.isna(first["uplink_MB@0.9"])


def test_format_table_shows_a_dash_where_a_target_was_not_reached(run_dir):
    text = format_table(tta_table([load_run(run_dir)], [0.8, 0.9]))
    header, row = text.splitlines()
    assert header.split() == ["run", "algorithm", "rounds", "sim_time_s", "final_accuracy", "best_accuracy",
                              "time_s@0.8", "uplink_MB@0.8", "rounds@0.8",
                              "time_s@0.9", "uplink_MB@0.9", "rounds@0.9"]
    assert row.split() == ["tiny/0", "fedavg", "5", "60.0", "0.790", "0.810", "52.5", "0.011", "4", "-", "-", "-"]


def test_write_report_writes_every_file_and_returns_the_table(tmp_path, run_dir, slower_run_dir):
    out = tmp_path / "report"
    text, paths = write_report([run_dir, slower_run_dir], out)
    names = {path.name for path in paths}
    assert names == {"accuracy_vs_time.png", "accuracy_vs_bytes_up.png", "accuracy_vs_flops.png",
                     "gantt_tiny_0.png", "breakdown_tiny_0.png", "gantt_tiny_1.png", "breakdown_tiny_1.png",
                     "tta.csv"}
    assert all(path.parent == out and path.stat().st_size > 0 for path in paths)
    # Targets default to the scenarios' stop.target_accuracy (0.8): reached at 52.5 s and 60 s.
    assert "time_s@0.8" in text and "time_s@0.5" not in text
    assert "52.5" in text and "60.0" in text
    csv = pd.read_csv(out / "tta.csv")
    assert list(csv["time_s@0.8"]) == [52.5, 60.0]


def test_write_report_without_targets_in_the_scenarios_uses_the_defaults(tmp_path, run_dir):
    scenario = run_dir / "scenario.resolved.yaml"
    scenario.write_text(scenario.read_text().replace("target_accuracy: 0.8", "target_accuracy: null"))
    text, _ = write_report([run_dir], tmp_path / "report")
    assert all(f"time_s@{target}" in text for target in ("0.5", "0.8", "0.9"))


def test_table_shows_the_personalized_accuracy_when_a_run_has_one(tmp_path):
    import pandas as pd

    from analysis.report import tta_table
    from analysis.runs import Run

    rounds = pd.DataFrame({"round": [1, 2], "t_start_s": [0.0, 1.0], "t_end_s": [1.0, 2.0], "bytes_up": [1, 1],
                           "bytes_down": [1, 1], "flops": [1, 1], "wasted_flops": [0, 0], "wasted_bytes": [0, 0],
                           "dropped": [0, 0], "late": [0, 0], "surplus": [0, 0], "accuracy": [0.5, 0.6],
                           "local_accuracy": [0.4, 0.7]})
    run = Run(tmp_path, "x", 0, "fedavg", {}, rounds, pd.DataFrame(), {})
    assert tta_table([run], [0.55]).loc[0, "final_local_accuracy"] == 0.7
    assert "final_local_accuracy" not in tta_table([run.__class__(**{**run.__dict__,
                                                    "rounds": rounds.drop(columns="local_accuracy")})], [0.55])
