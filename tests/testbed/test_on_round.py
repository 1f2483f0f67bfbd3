"""Per-round callbacks (testbed/hooks.py): `testbed.run(..., on_round=fn)` sees each round's row as rounds.csv holds
it, before it is written; a reason ends the run after that round (summary.json's stop_reason, a finished checkpoint),
in a synchronous and an asynchronous run; a callback that raises or answers nonsense is one TestbedError naming
it, its exception chained, the rounds before kept."""
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import tiny_blobs, tiny_scenario

import testbed
import testbed.data
from testbed.errors import PluginError, TestbedError


@pytest.fixture
def tiny(monkeypatch) -> dict:
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    return tiny_scenario({"name": "fedavg"}, rounds=6)


def _same(row: dict, table_row: pd.Series) -> bool:
    return all(math.isclose(v, table_row[k], rel_tol=1e-12) or (math.isnan(v) and math.isnan(table_row[k]))
               for k, v in row.items())


def test_the_callback_sees_every_row_as_the_table_holds_it(tiny, tmp_path):
    seen = []
    run = testbed.run(tiny, out=tmp_path, quiet=True, plots=False, on_round=seen.append)
    assert [row["round"] for row in seen] == [1, 2, 3, 4, 5, 6]
    assert list(seen[0]) == list(run.rounds.columns)
    assert all(_same(row, run.rounds.iloc[i]) for i, row in enumerate(seen))
    assert "stop_reason" not in run.summary and run.summary["status"] == "completed"


def test_a_reason_ends_the_run_after_that_round(tiny, tmp_path):
    seen = []

    def stop_at_three(row):
        seen.append(row["round"])
        return "my own target" if row["round"] == 3 else None

    run = testbed.run(tiny, out=tmp_path, quiet=True, plots=False, on_round=[stop_at_three, lambda row: None])
    assert seen == [1, 2, 3] and list(run.rounds["round"]) == [1, 2, 3]
    assert run.summary["status"] == "completed" and run.summary["stop_reason"] == "on_round: my own target"
    again = testbed.run(tiny, out=tmp_path, quiet=True, plots=False, resume=True)  # a finished run: nothing to play
    assert list(again.rounds["round"]) == [1, 2, 3]


def test_true_stops_and_names_the_callback(tiny, tmp_path):
    run = testbed.run(tiny, out=tmp_path, quiet=True, plots=False, on_round=lambda row: row["round"] == 2)
    assert list(run.rounds["round"]) == [1, 2]
    assert run.summary["stop_reason"].startswith("on_round: <lambda> (") and "at round 2" in run.summary["stop_reason"]


def test_an_asynchronous_run_stopped_ends_as_one_whose_last_aggregation_it_was(tiny, tmp_path):
    """Stopped at aggregation 3, its tasks in flight are cut there as a run of stop.max_rounds 3 cuts them: the
    same tables byte for byte; the callback saw the row before they were cut."""
    tiny["protocol"] = {"kind": "async", "concurrency": 2, "buffer_size": 1}
    seen = []
    stopped = testbed.run(tiny, out=tmp_path / "stopped", quiet=True, plots=False,
                          on_round=lambda row: seen.append(row) or ("enough" if row["round"] == 3 else None))
    three = testbed.run(tiny, set={"stop.max_rounds": 3}, out=tmp_path / "three", quiet=True, plots=False)
    for table in ("rounds.csv", "events.csv"):
        assert (stopped.path / table).read_bytes() == (three.path / table).read_bytes()
    assert stopped.rounds.iloc[-1]["unfinished"] == 1 and seen[-1]["unfinished"] == 0
    assert stopped.summary["stop_reason"] == "on_round: enough"


def test_a_synchronous_run_stopped_writes_the_tables_of_one_that_ended_there(tiny, tmp_path):
    stopped = testbed.run(tiny, out=tmp_path / "stopped", quiet=True, plots=False,
                          on_round=lambda row: "enough" if row["round"] == 3 else None)
    three = testbed.run(tiny, set={"stop.max_rounds": 3}, out=tmp_path / "three", quiet=True, plots=False)
    for table in ("rounds.csv", "events.csv"):
        assert (stopped.path / table).read_bytes() == (three.path / table).read_bytes()


def test_a_callback_that_raises_is_one_line_naming_it_with_its_exception_chained(tiny, tmp_path):
    def broken(row):
        if row["round"] == 2:
            raise ZeroDivisionError("division by zero")

    with pytest.raises(TestbedError) as caught:
        testbed.run(tiny, out=tmp_path, quiet=True, plots=False, on_round=broken)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("on_round: broken (")
    assert "raised ZeroDivisionError at round 2: division by zero" in message and "test_on_round.py:" in message
    assert isinstance(caught.value, PluginError) and isinstance(caught.value.__cause__, ZeroDivisionError)
    folder = tmp_path / "tiny" / "0"
    assert list(pd.read_csv(folder / "rounds.csv")["round"]) == [1]
    assert json.loads((folder / "summary.json").read_text())["status"].startswith("failed: on_round")


def test_an_answer_that_is_not_a_reason_is_refused(tiny, tmp_path):
    with pytest.raises(TestbedError, match=r"on_round: <lambda> \(.*\) returned float 0\.\d+; return None or False "
                                           r"to go on, True or a reason \(a str\) to stop the run"):
        testbed.run(tiny, out=tmp_path, quiet=True, plots=False, on_round=lambda row: row["accuracy"])


@pytest.mark.parametrize("stop, go_on", [(np.bool_(True), np.bool_(False)), (torch.tensor(True), torch.tensor(False))],
                         ids=["numpy", "torch"])
def test_a_numpy_or_torch_bool_counts_as_its_python_value(tiny, tmp_path, stop, go_on):
    """`row["accuracy"] > threshold` with a numpy threshold gives numpy.bool_: it stops the run as True does."""
    run = testbed.run(tiny, out=tmp_path / "stop", quiet=True, plots=False,
                      on_round=lambda row: stop if row["round"] == 2 else go_on)
    assert list(run.rounds["round"]) == [1, 2] and run.summary["stop_reason"].startswith("on_round: <lambda>")


def test_callbacks_are_refused_where_they_cannot_run(tiny, tmp_path):
    with pytest.raises(TestbedError, match="on_round: 3 is not callable"):
        testbed.run(tiny, out=tmp_path, quiet=True, on_round=[3])
    with pytest.raises(TestbedError, match="its functions run in this process"):
        testbed.run(tiny, out=tmp_path, quiet=True, seeds=[0, 1], jobs=2, on_round=print)
