import json
import math

import numpy as np
import pytest

from analysis.metrics import cost_to_accuracy, round_breakdown, summarize, time_breakdown, time_to_accuracy


def test_time_to_accuracy_is_the_end_of_the_first_round_reaching_the_target(rounds):
    assert time_to_accuracy(rounds, 0.4) == 25.0
    assert time_to_accuracy(rounds, 0.42) == 25.0  # >= counts
    # Round 3 (ends at 40 s) is not evaluated: its NaN must neither reach nor stop the search.
    assert time_to_accuracy(rounds, 0.8) == 52.5
    assert time_to_accuracy(rounds, 0.9) is None


def test_time_to_accuracy_of_a_run_never_evaluated_is_none(rounds):
    rounds["accuracy"] = None
    assert time_to_accuracy(rounds, 0.1) is None


def test_cost_to_accuracy_sums_every_round_up_to_the_one_reaching_the_target(rounds):
    # Rounds 1-4, the unevaluated rounds 1 and 3 included.
    assert cost_to_accuracy(rounds, 0.8) == {
        "time_s": 52.5, "round": 4, "rounds": 4, "bytes_up": 11000, "bytes_down": 12000, "flops": 3000,
    }
    assert cost_to_accuracy(rounds, 0.4) == {
        "time_s": 25.0, "round": 2, "rounds": 2, "bytes_up": 5000, "bytes_down": 6000, "flops": 1200,
    }
    assert set(cost_to_accuracy(rounds, 0.95).values()) == {None}


def test_summarize_totals_and_targets(rounds):
    summary = summarize(rounds, [0.4, 0.8, 0.9])
    assert summary["final_accuracy"] == 0.79  # the last evaluated round, not the best one
    assert summary["best_accuracy"] == 0.81
    assert summary["rounds"] == 5
    assert summary["evaluations"] == 3
    assert summary["sim_time_s"] == 60.0
    assert summary["bytes_up_total"] == 14000
    assert summary["bytes_down_total"] == 15000
    assert summary["flops_total"] == 3900
    assert summary["wasted_flops_total"] == 600
    assert summary["wasted_bytes_total"] == 2500
    assert (summary["dropped_total"], summary["late_total"], summary["surplus_total"]) == (1, 1, 1)
    assert summary["time_to_accuracy_s"] == {"0.4": 25.0, "0.8": 52.5, "0.9": None}
    assert summary["rounds_to_accuracy"] == {"0.4": 2, "0.8": 4, "0.9": None}
    assert summary["bytes_up_to_accuracy"] == {"0.4": 5000, "0.8": 11000, "0.9": None}
    assert summary["flops_to_accuracy"] == {"0.4": 1200, "0.8": 3000, "0.9": None}


def test_summarize_gives_plain_json_without_nan(rounds):
    rounds.loc[4, "accuracy"] = np.nan  # the last round not evaluated
    summary = summarize(rounds, [0.8, None])
    text = json.dumps(summary, allow_nan=False)
    assert json.loads(text) == summary
    assert summary["final_accuracy"] == 0.81
    assert type(summary["bytes_up_total"]) is int
    assert type(summary["sim_time_s"]) is float
    assert list(summary["time_to_accuracy_s"]) == ["0.8"]  # a None target is no target


def test_summarize_a_run_without_evaluations_or_rounds(rounds):
    rounds["accuracy"] = np.nan
    summary = summarize(rounds, [0.5])
    assert summary["final_accuracy"] is None and summary["best_accuracy"] is None
    empty = summarize(rounds.iloc[:0], [0.5])
    assert empty["rounds"] == 0 and empty["sim_time_s"] is None
    json.dumps(empty, allow_nan=False)


def test_time_breakdown_per_device(events):
    table = time_breakdown(events)
    assert list(table.index) == ["a", "b", "c"]
    assert table.loc["a"].to_dict() == pytest.approx({
        "download_s": 3.0, "compute_s": 10.5, "upload_s": 3.5, "busy_s": 17.0, "wasted_s": 0.0,
        "rounds": 3, "dropped": 0, "late": 0, "surplus": 0})
    # b dropped in round 1 and was late in round 2: everything it did in both rounds was wasted,
    # its completed download and compute included (2+2 and 2+8+5 seconds).
    assert table.loc["b"].to_dict() == pytest.approx({
        "download_s": 5.5, "compute_s": 13.0, "upload_s": 6.0, "busy_s": 24.5, "wasted_s": 19.0,
        "rounds": 3, "dropped": 1, "late": 1, "surplus": 0})
    assert table.loc["c", "wasted_s"] == pytest.approx(5.5)
    assert table.loc["c", "surplus"] == 1


def test_round_breakdown_accounts_for_every_selected_device_second(rounds, events):
    table = round_breakdown(rounds, events)
    assert list(table.index) == [1, 2, 3, 4, 5]
    assert table.loc[1].to_dict() == pytest.approx(
        {"compute_s": 10.0, "communication_s": 5.0, "wasted_s": 4.0, "idle_s": 11.0})
    assert table.loc[2].to_dict() == pytest.approx(
        {"compute_s": 10.0, "communication_s": 5.5, "wasted_s": 15.0, "idle_s": 14.5})
    assert table.loc[5].to_dict() == pytest.approx(
        {"compute_s": 5.5, "communication_s": 4.5, "wasted_s": 5.5, "idle_s": 7.0})
    # A round without events: the selected devices were idle the whole round.
    assert table.loc[3, "idle_s"] == 45.0
    lengths = (rounds["t_end_s"] - rounds["t_start_s"]).to_numpy()
    assert np.allclose(table.sum(axis=1), rounds["selected"].to_numpy() * lengths)
    assert not math.isnan(table.to_numpy().sum())


def test_cost_to_accuracy_on_the_local_accuracy(rounds):
    # Global accuracy 0.42, 0.81, 0.79 in rounds 2, 4, 5; the devices on their own data 0.6, 0.75, 0.85.
    rounds["local_accuracy"] = [None, 0.6, None, 0.75, 0.85]
    assert time_to_accuracy(rounds, 0.8) == 52.5  # global: round 4
    assert cost_to_accuracy(rounds, 0.8, metric="local_accuracy") == {
        "time_s": 60.0, "round": 5, "rounds": 5, "bytes_up": 14000, "bytes_down": 15000, "flops": 3900,
    }
    # 0.5: the local accuracy is there in round 2 (25 s), the global one only in round 4.
    assert (time_to_accuracy(rounds, 0.5), time_to_accuracy(rounds, 0.5, "local_accuracy")) == (52.5, 25.0)
    assert time_to_accuracy(rounds, 0.9, "local_accuracy") is None
    assert time_to_accuracy(rounds.drop(columns="local_accuracy"), 0.5, "local_accuracy") is None
