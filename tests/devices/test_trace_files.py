import json
import pickle

import numpy as np
import pytest

from devices import Availability, load_fedscale_trace, load_interval_trace

SEED = np.random.SeedSequence(0)

FEDSCALE_CLIENTS = {
    10: {"active": [0, 50], "inactive": [5, 60], "finish_time": 100, "duration": 15, "model": "CPH1801"},
    3: {"active": [10, 50], "inactive": [20, 60], "finish_time": 100, "duration": 20, "model": "SM-G930F"},
    7: {"active": [30], "inactive": [40], "finish_time": 50, "duration": 10, "model": "Pixel"},
}


def write(path, text):
    path.write_text(text)
    return path


def test_interval_csv_keeps_first_appearance_order(tmp_path):
    path = write(tmp_path / "trace.csv", "device,start_s,end_s\nb,0,10\na,5,8\nb,20,30\n")
    traces = load_interval_trace(path)
    assert [t.tolist() for t in traces.traces] == [[[0, 10], [20, 30]], [[5, 8]]]
    assert traces.period_s == (None, None)
    availability = Availability([(traces, 2)], SEED)
    assert availability.online_at(6).tolist() == [True, True]
    assert availability.next_online(0, 10) == 20
    assert availability.next_online(1, 8) == float("inf")  # no period: offline after its last interval


def test_fedscale_pickle_sorted_by_client_and_repeating(tmp_path):
    path = tmp_path / "client_behave_trace"
    path.write_bytes(pickle.dumps(FEDSCALE_CLIENTS))
    traces = load_fedscale_trace(path)
    assert [t.tolist() for t in traces.traces] == [[[10, 20], [50, 60]], [[30, 40]], [[0, 5], [50, 60]]]
    assert traces.period_s == (100.0, 50.0, 100.0)
    availability = Availability([(traces, 3)], SEED)
    assert availability.online_at(115).tolist() == [True, False, False]  # 115 % 100 = 15
    assert availability.online_at(132).tolist() == [False, True, False]  # client 7: 132 % 50 = 32
    assert availability.online_until(0, 155) == 160
    assert availability.next_online(2, 6) == 50


def test_fedscale_json_sorts_ids_as_numbers(tmp_path):
    path = write(tmp_path / "trace.json", json.dumps(FEDSCALE_CLIENTS))  # JSON keys become "10", "3", "7"
    traces = load_fedscale_trace(path)
    assert [t.tolist() for t in traces.traces] == [[[10, 20], [50, 60]], [[30, 40]], [[0, 5], [50, 60]]]


def one_line_error(error_type, load, path):
    with pytest.raises(error_type) as error:
        load(path)
    message = str(error.value.args[0])
    assert str(path) in message and "\n" not in message
    return message


def test_missing_files(tmp_path):
    for load in (load_interval_trace, load_fedscale_trace):
        one_line_error(FileNotFoundError, load, tmp_path / "absent.csv")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("client,begin,end\na,0,1\n", "expected columns device,start_s,end_s"),
        ("device,start_s,end_s\na,0,1\na,zero,1\n", "line 3: expected a label and two numbers"),
        ("device,start_s,end_s\na,0,1,2\n", "line 2"),
        ("device,start_s,end_s\n", "expected at least one interval row"),
        ("device,start_s,end_s\na,5,1\n", "start_s <= end_s"),
        ("", "expected columns"),
    ],
)
def test_malformed_csv(tmp_path, text, expected):
    path = write(tmp_path / "trace.csv", text)
    assert expected in one_line_error(ValueError, load_interval_trace, path)


@pytest.mark.parametrize(
    "clients, expected",
    [
        ([1, 2], "expected a non-empty dict"),
        ({}, "expected a non-empty dict"),
        ({"1": {"active": [0], "inactive": [1]}}, "client '1': expected numeric active, inactive, finish_time"),
        ({"1": {"active": [0, 5], "inactive": [1], "finish_time": 9}}, "equal length"),
        ({"1": {"active": [0], "inactive": [1], "finish_time": 0}}, "period_s"),
    ],
)
def test_malformed_fedscale_json(tmp_path, clients, expected):
    path = write(tmp_path / "trace.json", json.dumps(clients))
    assert expected in one_line_error(ValueError, load_fedscale_trace, path)


def test_not_json_or_not_a_pickle(tmp_path):
    json_path = write(tmp_path / "trace.json", "{not json")
    assert "expected JSON" in one_line_error(ValueError, load_fedscale_trace, json_path)
    pickle_path = tmp_path / "trace.pkl"
    pickle_path.write_bytes(b"\x00garbage")
    assert "expected a pickle" in one_line_error(ValueError, load_fedscale_trace, pickle_path)
