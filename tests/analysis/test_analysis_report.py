import io

import numpy as np
import pandas as pd
import pytest
from helpers import printed_table

from analysis.report import format_seed_table, format_table, seed_table, tta_table, write_report
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
    assert first["TFLOPs@0.8"] == pytest.approx((600 + 600 + 900 + 900) / 1e12)  # rounds 1-4
    assert (second["time_s@0.8"], second["rounds@0.8"]) == (60.0, 5)
    assert pd.isna(first["time_s@0.9"]) and pd.isna(first["rounds@0.9"]) and pd.isna(first["uplink_MB@0.9"])


def test_format_table_shows_a_dash_where_a_target_was_not_reached(run_dir):
    text = format_table(tta_table([load_run(run_dir)], [0.8, 0.9]))
    header, row = text.splitlines()
    assert header.split() == ["run", "scenario", "algorithm", "rounds", "sim_time_s", "total_TFLOPs",
                              "total_uplink_MB", "final_accuracy", "best_accuracy", "last3_accuracy",
                              "time_s@0.8", "uplink_MB@0.8", "TFLOPs@0.8", "rounds@0.8",
                              "time_s@0.9", "uplink_MB@0.9", "TFLOPs@0.9", "rounds@0.9"]
    assert row.split() == ["tiny/0", "tiny", "fedavg", "5", "60.0", "0.000", "0.014", "0.790", "0.810", "0.673",
                           "52.5", "0.011", "0.000", "4", "-", "-", "-", "-"]


def test_write_report_writes_every_file_and_returns_the_table(tmp_path, run_dir, slower_run_dir):
    out = tmp_path / "report"
    text, paths = write_report([run_dir, slower_run_dir], out)
    names = {path.name for path in paths}
    # Two seeds of one scenario: the seed-averaged plots and table come too.
    assert names == {"accuracy_vs_time.png", "accuracy_vs_bytes_up.png", "accuracy_vs_flops.png",
                     "accuracy_mean_vs_time.png", "accuracy_mean_vs_bytes_up.png", "accuracy_mean_vs_flops.png",
                     "gantt_tiny_0.png", "breakdown_tiny_0.png", "gantt_tiny_1.png", "breakdown_tiny_1.png",
                     "tta.csv", "tta_by_scenario.csv"}
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
    row = tta_table([run], [0.55]).loc[0]
    assert row["final_local_accuracy"] == 0.7
    # Fewer than three evaluated rounds: the mean over those there are.
    assert row["last3_local_accuracy"] == pytest.approx(0.55) and row["last3_accuracy"] == pytest.approx(0.55)
    assert "final_local_accuracy" not in tta_table([run.__class__(**{**run.__dict__,
                                                    "rounds": rounds.drop(columns="local_accuracy")})], [0.55])


@pytest.fixture
def other_run_dir(tmp_path, make_run):
    """A second scenario with one seed: the tiny run's numbers under another name and algorithm."""
    return make_run(tmp_path / "runs" / "other" / "0", name="other", algorithm="fedprox")


def with_columns(rounds_csv, **columns):
    """rounds.csv text with columns replaced or added, one value per round (None: not evaluated)."""
    rounds = pd.read_csv(io.StringIO(rounds_csv))
    for column, values in columns.items():
        rounds[column] = pd.array(values, dtype="Float64")
    return rounds.to_csv(index=False)


def test_tta_table_totals_and_the_mean_of_the_last_three_evaluations(tmp_path, make_run, rounds_csv):
    # Four evaluated rounds (3 is not): the last three are 2, 4 and 5.
    rounds = with_columns(rounds_csv, accuracy=[0.2, 0.4, None, 0.6, 0.9],
                          local_accuracy=[None, 0.5, 0.6, 0.7, 0.8])
    row = tta_table([load_run(make_run(tmp_path / "runs" / "tiny" / "0", rounds=rounds))], [0.8]).loc[0]
    assert row["total_TFLOPs"] == pytest.approx(3900 / 1e12)  # every round's FLOPs, wasted ones included
    assert row["total_uplink_MB"] == pytest.approx(0.014)
    assert row["last3_accuracy"] == pytest.approx((0.4 + 0.6 + 0.9) / 3)
    assert row["last3_local_accuracy"] == pytest.approx((0.6 + 0.7 + 0.8) / 3)
    assert (row["final_accuracy"], row["final_local_accuracy"]) == (0.9, 0.8)


def test_tta_table_last3_of_the_tiny_run(run_dir):
    assert tta_table([load_run(run_dir)], [0.8]).loc[0, "last3_accuracy"] == pytest.approx((0.42 + 0.81 + 0.79) / 3)


TARGETS = [0.8, 0.85, 0.9]


def test_seed_table_means_and_sample_stds_over_seeds(run_dir, slower_run_dir, other_run_dir):
    runs = [load_run(path) for path in (run_dir, slower_run_dir, other_run_dir)]
    table = seed_table(tta_table(runs, TARGETS))
    assert list(table["scenario"]) == ["tiny", "other"] and list(table["algorithm"]) == ["fedavg", "fedprox"]
    assert list(table["seeds"]) == [2, 1]
    tiny, other = table.iloc[0], table.iloc[1]
    # final accuracy 0.79 and 0.85: mean 0.82, sample std |0.85 - 0.79| / sqrt(2)
    assert tiny["final_accuracy"] == pytest.approx(0.82)
    assert tiny["final_accuracy_std"] == pytest.approx(0.06 / np.sqrt(2))
    assert tiny["last3_accuracy"] == pytest.approx(((0.42 + 0.81 + 0.79) / 3 + (0.42 + 0.6 + 0.85) / 3) / 2)
    assert (tiny["sim_time_s"], tiny["sim_time_s_std"]) == (60.0, 0.0)
    assert tiny["total_TFLOPs"] == pytest.approx(3.9e-9)
    # 0.8 reached by both seeds, at 52.5 s and 60 s
    assert (tiny["time_s@0.8"], tiny["time_s@0.8_std"]) == pytest.approx((56.25, 7.5 / np.sqrt(2)))
    assert (tiny["rounds@0.8"], tiny["rounds@0.8_std"]) == pytest.approx((4.5, 1 / np.sqrt(2)))
    # One scenario with a single seed: its values, and no std.
    assert other["final_accuracy"] == 0.79 and pd.isna(other["final_accuracy_std"])


def test_seed_table_averages_a_target_over_only_the_seeds_reaching_it(run_dir, slower_run_dir, other_run_dir):
    runs = [load_run(path) for path in (run_dir, slower_run_dir, other_run_dir)]
    table = seed_table(runs, TARGETS)
    assert list(table["reached@0.8"]) == ["2/2", "1/1"]
    assert list(table["reached@0.85"]) == ["1/2", "0/1"]  # only seed 1 (0.85 in its last round)
    assert list(table["reached@0.9"]) == ["0/2", "0/1"]
    tiny = table.iloc[0]
    assert (tiny["time_s@0.85"], tiny["uplink_MB@0.85"], tiny["rounds@0.85"]) == (60.0, 0.014, 5.0)
    assert pd.isna(tiny["time_s@0.85_std"]) and pd.isna(tiny["time_s@0.9"])
    # Reach counts sit right before the costs they qualify.
    columns = list(table.columns)
    assert columns.index("reached@0.85") + 1 == columns.index("time_s@0.85")


def test_seed_table_of_runs_equals_that_of_their_table(run_dir, slower_run_dir):
    runs = [load_run(run_dir), load_run(slower_run_dir)]
    pd.testing.assert_frame_equal(seed_table(runs), seed_table(tta_table(runs, [0.8])))  # the scenarios' target


def test_seed_table_never_averages_two_algorithms(tmp_path, make_run):
    runs = [load_run(make_run(tmp_path / algorithm / "tiny" / "0", algorithm=algorithm))
            for algorithm in ("fedavg", "fedprox")]
    table = seed_table(runs, [0.8])
    assert list(table["algorithm"]) == ["fedavg", "fedprox"] and list(table["seeds"]) == [1, 1]


def test_format_seed_table_writes_mean_plus_minus_std(run_dir, slower_run_dir, other_run_dir):
    runs = [load_run(path) for path in (run_dir, slower_run_dir, other_run_dir)]
    header, tiny, other = format_seed_table(seed_table(runs, TARGETS)).splitlines()
    columns = header.split()
    assert "final_accuracy_std" not in columns and "reached@0.85" in columns
    cell = dict(zip(columns, tiny.split()))
    assert cell["seeds"] == "2" and cell["final_accuracy"] == "0.820±0.042" and cell["best_accuracy"] == "0.830±0.028"
    assert cell["sim_time_s"] == "60.0±0.0" and cell["rounds@0.8"] == "4.5±0.7"
    assert (cell["reached@0.85"], cell["time_s@0.85"], cell["time_s@0.9"]) == ("1/2", "60.0", "-")
    cell = dict(zip(columns, other.split()))
    assert (cell["final_accuracy"], cell["reached@0.8"], cell["time_s@0.8"]) == ("0.790", "1/1", "52.5")


def test_write_report_without_repeated_seeds_writes_no_seed_table(tmp_path, run_dir, other_run_dir):
    out = tmp_path / "report"
    text, paths = write_report([run_dir, other_run_dir], out)
    assert not any("mean" in path.name or path.name == "tta_by_scenario.csv" for path in paths)
    assert not (out / "tta_by_scenario.csv").exists() and "±" not in text


def test_write_report_writes_the_seed_table_and_local_accuracy_plot(tmp_path, make_run, rounds_csv, other_run_dir):
    local = with_columns(rounds_csv, local_accuracy=[None, 0.5, None, 0.7, 0.8])
    seeds = [make_run(tmp_path / "runs" / "tiny" / str(seed), rounds=local, seed=seed) for seed in (0, 1)]
    out = tmp_path / "report"
    text, paths = write_report([*seeds, other_run_dir], out)
    assert out / "local_accuracy_mean_vs_time.png" in paths and out / "tta_by_scenario.csv" in paths
    csv = pd.read_csv(out / "tta_by_scenario.csv")
    assert list(csv["scenario"]) == ["tiny", "other"] and list(csv["reached@0.8"]) == ["2/2", "1/1"]
    assert csv.loc[0, "last3_local_accuracy"] == pytest.approx(2.0 / 3) and csv.loc[0, "last3_local_accuracy_std"] == 0
    assert text.index("tiny/0") < text.index("mean±std") < text.index("2/2")


def test_cli_report_prints_the_seed_table_after_the_per_run_table(tmp_path, run_dir, slower_run_dir, capsys,
                                                                   unrendered):
    from testbed.cli import main

    out = tmp_path / "report"
    assert main(["report", str(run_dir), str(slower_run_dir), "--out", str(out), "--target", "0.85"]) == 0
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    per_run = next(i for i, line in enumerate(lines) if line.split()[:1] == ["run"])
    by_scenario = next(i for i, line in enumerate(lines) if line.split()[:1] == ["scenario"])
    assert per_run < by_scenario
    assert [row["run"] for row in printed_table(printed, "run")] == ["tiny/0", "tiny/1"]
    cell, = printed_table(printed, "scenario")   # its columns in blocks that fit 100 columns
    assert cell["scenario"] == "tiny" and cell["seeds"] == "2" and cell["final_accuracy"] == "0.820±0.042"
    assert (cell["reached@0.85"], cell["time_s@0.85"]) == ("1/2", "60.0")
    assert "over only the seeds that reached it" in printed
    assert str(out / "tta_by_scenario.csv") in printed and str(out / "accuracy_mean_vs_time.png") in printed


# The tiny run with its devices scored on their own test data: 0.6, 0.75, 0.85 in rounds 2, 4, 5 (global
# accuracy 0.42, 0.81, 0.79). Local accuracy reaches 0.8 only in round 5 (60 s, where global took 52.5 s)
# and 0.5 already in round 2 (25 s, global: round 4).
LOCAL = [None, 0.6, None, 0.75, 0.85]


@pytest.fixture
def local_run_dir(tmp_path, make_run, rounds_csv):
    return make_run(tmp_path / "runs" / "tiny" / "0", rounds=with_columns(rounds_csv, local_accuracy=LOCAL))


def test_tta_table_on_the_local_accuracy(local_run_dir):
    run = load_run(local_run_dir)
    local = tta_table([run], [0.5, 0.8], metric="local_accuracy").loc[0]
    assert (local["time_s@0.8"], local["uplink_MB@0.8"], local["rounds@0.8"]) == (60.0, 0.014, 5)
    assert (local["time_s@0.5"], local["rounds@0.5"]) == (25.0, 2)
    default = tta_table([run], [0.5, 0.8]).loc[0]
    assert (default["time_s@0.8"], default["time_s@0.5"]) == (52.5, 52.5)
    # Only the targets move: the headline numbers are the same whatever the metric.
    assert local["final_accuracy"] == default["final_accuracy"] == 0.79 and local["final_local_accuracy"] == 0.85


def test_seed_table_on_the_local_accuracy(tmp_path, make_run, rounds_csv, local_run_dir):
    # Seed 1: local accuracy 0.5, 0.82, 0.7: reaches 0.8 in round 4 (52.5 s).
    seed_1 = make_run(tmp_path / "runs" / "tiny" / "1", seed=1,
                      rounds=with_columns(rounds_csv, local_accuracy=[None, 0.5, None, 0.82, 0.7]))
    table = seed_table([load_run(local_run_dir), load_run(seed_1)], [0.8, 0.85], metric="local_accuracy")
    tiny = table.iloc[0]
    assert (tiny["reached@0.8"], tiny["reached@0.85"]) == ("2/2", "1/2")
    assert (tiny["time_s@0.8"], tiny["time_s@0.85"]) == (pytest.approx((60.0 + 52.5) / 2), 60.0)


def test_a_run_without_local_accuracy_cannot_be_reported_on_it(tmp_path, run_dir, make_run, rounds_csv):
    from analysis.report import MissingMetric

    # No local_accuracy column at all, and one that is there but empty (no local test split).
    empty = make_run(tmp_path / "runs" / "empty" / "0", name="empty",
                     rounds=with_columns(rounds_csv, local_accuracy=[None] * 5))
    for folder in (run_dir, empty):
        with pytest.raises(MissingMetric, match="data.client_split.test_fraction > 0") as caught:
            write_report([folder], tmp_path / "report", metric="local_accuracy")
        assert str(folder) in str(caught.value)
    assert not (tmp_path / "report").exists()
    with pytest.raises(ValueError, match="local_accuracy"):
        tta_table([load_run(run_dir)], [0.8], metric="loss")


def test_write_report_on_the_local_accuracy_names_it(tmp_path, local_run_dir, make_run, rounds_csv):
    seed_1 = make_run(tmp_path / "runs" / "tiny" / "1", seed=1, rounds=with_columns(rounds_csv, local_accuracy=LOCAL))
    out = tmp_path / "report"
    text, paths = write_report([local_run_dir, seed_1], out, [0.8], metric="local_accuracy")
    names = {path.name for path in paths}
    # Beside the default report's files, not over them.
    assert {f"local_accuracy_vs_{x}.png" for x in ("time", "bytes_up", "flops")} <= names
    assert {f"local_accuracy_mean_vs_{x}.png" for x in ("time", "bytes_up", "flops")} <= names
    assert {"tta_local_accuracy.csv", "tta_by_scenario_local_accuracy.csv"} <= names
    assert not any(name.startswith(("accuracy", "tta.", "tta_by_scenario.")) for name in names)
    assert text.splitlines()[0].startswith("targets on local_accuracy")
    assert list(pd.read_csv(out / "tta_local_accuracy.csv")["time_s@0.8"]) == [60.0, 60.0]


def test_cli_report_on_the_local_accuracy(tmp_path, local_run_dir, capsys, unrendered):
    from testbed.cli import main

    out = tmp_path / "report"
    assert main(["report", str(local_run_dir), "--out", str(out), "--target", "0.8",
                 "--metric", "local_accuracy"]) == 0
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert lines[0].startswith("targets on local_accuracy")
    assert printed_table(printed, "run")[0]["time_s@0.8"] == "60.0"  # global accuracy: 52.5
    assert f"  {out / 'local_accuracy_vs_time.png'}" in lines
    # The default is unchanged: global accuracy, and no note.
    assert main(["report", str(local_run_dir), "--out", str(out), "--target", "0.8"]) == 0
    printed = capsys.readouterr().out
    assert printed.split()[0] == "run" and printed_table(printed, "run")[0]["time_s@0.8"] == "52.5"


def test_cli_report_on_the_local_accuracy_of_a_run_without_it(tmp_path, run_dir, capsys):
    from testbed.cli import main

    assert main(["report", str(run_dir), "--out", str(tmp_path / "report"), "--metric", "local_accuracy"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"error: {run_dir}: no local_accuracy values in rounds.csv")
    assert "data.client_split.test_fraction > 0" in err and "--metric accuracy" in err
    with pytest.raises(SystemExit):
        main(["report", str(run_dir), "--metric", "loss"])


def test_runs_of_one_name_in_several_groups_are_not_counted_as_its_seeds(run_dir, slower_run_dir, make_run,
                                                                        tmp_path, unrendered):
    """tiny/0 and tiny/1 at lr 0.05, and tiny/0 again at lr 0.1 (another --set, another folder): grouped as
    compare groups them, tiny has two seeds at lr=0.05 and one at lr=0.1, not three."""
    from analysis.compare import group_runs

    other_lr = make_run(tmp_path / "other" / "tiny" / "0")
    for folder, lr in ((run_dir, 0.05), (slower_run_dir, 0.05), (other_lr, 0.1)):
        with open(folder / "scenario.resolved.yaml", "a") as scenario:
            scenario.write(f"client: {{lr: {lr}}}\n")
    out = tmp_path / "report"
    text, paths = write_report([run_dir, slower_run_dir, other_lr], out, [0.8],
                               groups=lambda runs: group_runs(runs)[0])
    table = pd.read_csv(out / "tta_by_scenario.csv")
    assert table[["scenario", "algorithm", "group", "seeds"]].values.tolist() == [
        ["tiny", "fedavg", "lr=0.05", 2], ["tiny", "fedavg", "lr=0.1", 1]]
    assert table["final_accuracy"].tolist() == pytest.approx([(0.79 + 0.85) / 2, 0.79])
    assert table["time_s@0.8"].tolist() == [(52.5 + 60) / 2, 52.5]
    # by name alone (the default) they are three seeds of tiny
    write_report([run_dir, slower_run_dir, other_lr], tmp_path / "by_name", [0.8])
    assert pd.read_csv(tmp_path / "by_name" / "tta_by_scenario.csv")["seeds"].tolist() == [3]
