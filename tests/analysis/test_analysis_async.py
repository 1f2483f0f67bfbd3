"""Async runs in the analysis: which work was used, where device time went, staleness, and the report and compare
commands on async and mixed run folders. Every number is checked by hand on conftest's async run (ASYNC_EVENTS)
and, for device_utilisation, on the tiny sync run."""
import json

import numpy as np
import pandas as pd
import pytest

from analysis.compare import write_compare
from analysis.compare_plots import participation
from analysis.metrics import UTILISATION_PARTS, device_utilisation, summarize, time_breakdown, unused_work
from analysis.plots import (plot_gantt, plot_staleness, plot_utilisation, staleness_by_class,
                            utilisation_by_class)
from analysis.report import write_report
from analysis.runs import device_classes, load_run
from testbed.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 10_000


def test_unused_work_is_each_rows_own_outcome_in_async_runs(async_events):
    unused = unused_work(async_events)
    assert unused.equals(async_events["outcome"] != "done")
    # Tasks 8 and 9 were used though their device had a dropped / unfinished task in the same window.
    assert not unused[async_events["task"].isin([8, 9])].any()
    assert set(async_events.loc[unused, "task"]) == {5, 6, 10, 11}


def test_unused_work_of_a_sync_run_wastes_a_cut_device_rounds_every_phase(events):
    # The tiny sync run marks only the cut phase: b's download before it dropped (round 1) is wasted too.
    unused = unused_work(events)
    assert list(events.loc[unused, ["device", "round"]].drop_duplicates().itertuples(index=False, name=None)) == [
        ("b", 1), ("b", 2), ("c", 5)]


def test_device_utilisation_of_the_async_run(async_rounds, async_events):
    table = device_utilisation(async_rounds, async_events, devices=["a", "b", "c", "d"])
    assert list(table.index) == ["a", "b", "c", "d"]
    # a: tasks 1, 3, 8 used (compute 1 + 0.5 + 0.25; download and upload 2 + 1.5 + 0.75), 6 dropped (1 + 0.5).
    # Task 1's update waited 3 -> 5 s in the buffer, while a ran task 3: no idle time waiting.
    assert table.loc["a"].to_dict() == pytest.approx({
        "compute_s": 1.75, "communication_s": 4.25, "wasted_s": 1.5, "busy_s": 7.5, "wait_s": 2.0, "idle_s": 4.5,
        "idle_wait_s": 0.0, "idle_other_s": 4.5, "span_s": 12.0, "utilisation": 7.5 / 12})
    # b: tasks 4, 7, 9 used, 11 cut at the end (0.25 s of download). Task 7 waited 10 -> 11 s with b idle,
    # task 9 11.75 -> 12 s while b downloaded task 11.
    assert table.loc["b"].to_dict() == pytest.approx({
        "compute_s": 1.25, "communication_s": 3.0, "wasted_s": 0.25, "busy_s": 4.5, "wait_s": 1.25, "idle_s": 7.5,
        "idle_wait_s": 1.0, "idle_other_s": 6.5, "span_s": 12.0, "utilisation": 4.5 / 12})
    # c: task 2 used (waited 6 -> 7 s while c ran task 5), 5 stale (5.5 s) and 10 unfinished (0.5 s).
    assert table.loc["c"].to_dict() == pytest.approx({
        "compute_s": 4.5, "communication_s": 1.5, "wasted_s": 6.0, "busy_s": 12.0, "wait_s": 1.0, "idle_s": 0.0,
        "idle_wait_s": 0.0, "idle_other_s": 0.0, "span_s": 12.0, "utilisation": 1.0})
    # d never had a task: idle the whole run.
    assert table.loc["d", ["busy_s", "idle_s", "idle_other_s", "utilisation"]].tolist() == [0.0, 12.0, 12.0, 0.0]
    assert np.allclose(table[list(UTILISATION_PARTS)].sum(axis=1), 12.0)


def test_device_utilisation_of_the_sync_run(rounds, events):
    table = device_utilisation(rounds, events)
    # a: waits for rounds 1, 2 and 5 to close after its uploads end at 6, 16.5 and 57 s: 4 + 8.5 + 3.
    assert table.loc["a"].to_dict() == pytest.approx({
        "compute_s": 10.5, "communication_s": 6.5, "wasted_s": 0.0, "busy_s": 17.0, "wait_s": 15.5, "idle_s": 43.0,
        "idle_wait_s": 15.5, "idle_other_s": 27.5, "span_s": 60.0, "utilisation": 17 / 60})
    # b: rounds 1 (dropped) and 2 (late) wasted; used in round 5 only, waiting 58 -> 60 s.
    assert table.loc["b"].to_dict() == pytest.approx({
        "compute_s": 3.0, "communication_s": 2.5, "wasted_s": 19.0, "busy_s": 24.5, "wait_s": 2.0, "idle_s": 35.5,
        "idle_wait_s": 2.0, "idle_other_s": 33.5, "span_s": 60.0, "utilisation": 24.5 / 60})
    # c: used in rounds 1 and 2 (waiting 9 -> 10 and 19 -> 25 s), surplus in round 5.
    assert table.loc["c", ["compute_s", "communication_s", "wasted_s", "wait_s", "idle_wait_s"]].tolist() == [
        12.0, 6.0, 5.5, 7.0, 7.0]
    # A sync device waits only between its upload and the round's end: never busy meanwhile.
    assert table["wait_s"].equals(table["idle_wait_s"])
    breakdown = time_breakdown(events)
    assert table["busy_s"].equals(breakdown["busy_s"]) and table["wasted_s"].equals(breakdown["wasted_s"])


def test_summarize_counts_stale_and_unfinished_and_weights_staleness_by_arrivals(async_rounds):
    summary = summarize(async_rounds, [0.6])
    assert (summary["stale_total"], summary["unfinished_total"], summary["dropped_total"]) == (1, 2, 1)
    # Rows' staleness_mean 0, 0.5, 0, 0 over 2, 2, 2, 1 aggregated updates: 1/7 (not the rows' mean, 1/8).
    assert summary["staleness_mean"] == pytest.approx(1 / 7)
    assert summary["time_to_accuracy_s"] == {"0.6": 12.0} and summary["rounds"] == 4
    json.dumps(summary, allow_nan=False)
    nothing = async_rounds.assign(arrived=0, staleness_mean=np.nan)
    assert summarize(nothing)["staleness_mean"] is None


def test_summarize_of_a_sync_run_has_no_async_keys(rounds):
    summary = summarize(rounds, [0.8])
    assert not {"stale_total", "unfinished_total", "staleness_mean"} & set(summary)
    assert list(summary)[list(summary).index("surplus_total") + 1] == "time_to_accuracy_s"


def test_device_classes_from_devices_csv_or_one_class(async_run_dir, run_dir):
    assert device_classes(load_run(async_run_dir)).to_dict() == {
        "a": "phone_high", "b": "phone_high", "c": "phone_low", "d": "phone_high"}
    assert device_classes(load_run(run_dir)).to_dict() == dict.fromkeys("abc", "all devices")


def test_utilisation_by_class_means_the_shares_over_each_class(async_run_dir):
    table = utilisation_by_class(load_run(async_run_dir))
    assert list(table.index) == ["phone_high", "phone_low"]
    # phone_high: a, b and d (idle throughout), 36 device-seconds; phone_low: c alone.
    assert table.loc["phone_high"].to_dict() == pytest.approx({
        "devices": 3, "compute_s": 3.0 / 36, "communication_s": 7.25 / 36, "wasted_s": 1.75 / 36,
        "idle_wait_s": 1.0 / 36, "idle_other_s": 23.0 / 36, "busy": 12.0 / 36})
    assert table.loc["phone_low"].to_dict() == pytest.approx({
        "devices": 1, "compute_s": 4.5 / 12, "communication_s": 1.5 / 12, "wasted_s": 0.5, "idle_wait_s": 0.0,
        "idle_other_s": 0.0, "busy": 1.0})
    assert np.allclose(table[list(UTILISATION_PARTS)].sum(axis=1), 1.0)


def test_staleness_by_class_counts_each_aggregated_update_once(async_run_dir, run_dir):
    table = staleness_by_class(load_run(async_run_dir))
    # Used: tasks 1, 3, 4, 7, 8, 9 (phone_high, staleness 0) and 2 (phone_low, staleness 1); 5 was stale.
    assert table.to_dict() == {"phone_high": {0: 6, 1: 0}, "phone_low": {0: 0, 1: 1}}
    assert staleness_by_class(load_run(run_dir)).empty  # sync: no staleness


def test_async_plots_write_pngs(async_run_dir, make_async_run, run_dir, tmp_path):
    run = load_run(async_run_dir)
    assert_png(plot_utilisation(run, tmp_path / "utilisation.png"))
    assert_png(plot_staleness(run, tmp_path / "staleness.png"))
    assert_png(plot_gantt(run, tmp_path / "gantt.png", rounds=4))  # stale, dropped and unfinished phases
    without_devices = load_run(make_async_run(tmp_path / "no-devices" / "0", devices=None))
    assert_png(plot_utilisation(without_devices, tmp_path / "one_class.png"))
    assert_png(plot_staleness(load_run(run_dir), tmp_path / "sync_staleness.png"))  # a note, no bars


def test_participation_of_an_async_run_marks_each_window(async_run_dir):
    cells = participation(load_run(async_run_dir))
    # The highest code of the tasks ending in each window: 1 used, 4 dropped, 5 stale, 6 unfinished.
    assert cells.to_dict("index") == {"a": {1: 1, 2: 0, 3: 4, 4: 0}, "b": {1: 0, 2: 1, 3: 1, 4: 6},
                                      "c": {1: 0, 2: 1, 3: 0, 4: 6}}


def test_write_report_of_an_async_run_swaps_the_breakdown_for_utilisation_and_staleness(async_run_dir, tmp_path):
    _, paths = write_report([async_run_dir], tmp_path / "report")
    names = {path.name for path in paths}
    assert names == {"accuracy_vs_time.png", "accuracy_vs_bytes_up.png", "accuracy_vs_flops.png",
                     "gantt_tiny-async_0.png", "utilisation_tiny-async_0.png", "staleness_tiny-async_0.png", "tta.csv"}


def test_write_report_of_sync_and_async_runs(async_run_dir, run_dir, tmp_path):
    text, paths = write_report([run_dir, async_run_dir], tmp_path / "report")
    names = {path.name for path in paths}
    assert {"gantt_tiny_0.png", "breakdown_tiny_0.png", "gantt_tiny-async_0.png", "utilisation_tiny-async_0.png",
            "staleness_tiny-async_0.png"} <= names
    assert not {"breakdown_tiny-async_0.png", "utilisation_tiny_0.png", "staleness_tiny_0.png"} & names
    assert "tiny-async/0" in text


@pytest.mark.slow
def test_report_and_compare_commands_on_async_and_mixed_folders(async_run_dir, run_dir, tmp_path, capsys):
    assert main(["report", str(async_run_dir), "--out", str(tmp_path / "one")]) == 0
    assert (tmp_path / "one" / "report.html").is_file() and (tmp_path / "one" / "staleness_tiny-async_0.png").is_file()
    assert main(["report", str(run_dir), str(async_run_dir), "--out", str(tmp_path / "mixed")]) == 0
    assert main(["compare", str(run_dir), str(async_run_dir), "--out", str(tmp_path / "compare")]) == 0
    printed = capsys.readouterr().out
    assert "tiny-async" in printed and str(tmp_path / "compare" / "breakdown_by_group.png") in printed


def test_the_group_breakdown_of_mixed_groups_is_the_whole_fleets_time(async_run_dir, run_dir, tmp_path):
    table, paths = write_compare([run_dir, async_run_dir], tmp_path / "compare")
    assert list(table["group"]) == ["tiny", "tiny-async"]
    assert_png(tmp_path / "compare" / "breakdown_by_group.png")
    assert pd.read_csv(tmp_path / "compare" / "compare.csv")["seeds"].tolist() == [1, 1]
