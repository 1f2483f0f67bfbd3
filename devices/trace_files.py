"""Availability traces read from files: a plain CSV of intervals, and FedScale's client_behave_trace.

Errors are one line naming the file and what was expected: a trace is usually someone else's download.
"""
import csv
import json
import pickle
from pathlib import Path

import numpy as np

from .availability import TraceIntervals

CSV_COLUMNS = ("device", "start_s", "end_s")
FEDSCALE_KEYS = ("active", "inactive", "finish_time")


def load_interval_trace(path) -> TraceIntervals:
    """CSV with header device,start_s,end_s; one trace per device label, in order of first appearance."""
    path = Path(path)
    rows_of: dict[str, list[tuple[float, float]]] = {}
    with _opened(path, "r", newline="") as file:
        reader = csv.reader(file)
        header = tuple(column.strip() for column in next(reader, ()))
        if header != CSV_COLUMNS:
            raise _malformed(path, f"expected columns {','.join(CSV_COLUMNS)}")
        for line_number, row in enumerate(reader, start=2):
            if not row:
                continue
            try:
                device, start_s, end_s = row
                rows_of.setdefault(device.strip(), []).append((float(start_s), float(end_s)))
            except ValueError:
                raise _malformed(path, f"line {line_number}: expected a label and two numbers") from None
    if not rows_of:
        raise _malformed(path, "expected at least one interval row")
    traces = [np.array(rows) for rows in rows_of.values()]
    return _trace_intervals(path, traces, [None] * len(traces))


def load_fedscale_trace(path) -> TraceIntervals:
    """FedScale's client_behave_trace: a pickle (or JSON of the same shape) of
    {client_id: {"active": [t0, ...], "inactive": [u0, ...], "finish_time": T, ...}}.

    Client j is online on [active[i], inactive[i]) and the trace repeats every finish_time seconds. Traces
    are ordered by client id, numerically where ids are numbers (JSON turns them into strings). A pickle
    runs code when loaded: load only traces you trust, as FedScale does.
    """
    path = Path(path)
    clients = _read_fedscale(path)
    if not isinstance(clients, dict) or not clients:
        raise _malformed(path, "expected a non-empty dict of client id -> {active, inactive, finish_time}")
    traces, periods = [], []
    for client_id in sorted(clients, key=_client_order):
        behaviour = clients[client_id]
        try:
            active = np.asarray(behaviour["active"], dtype=np.float64)
            inactive = np.asarray(behaviour["inactive"], dtype=np.float64)
            finish_time = float(behaviour["finish_time"])
        except (KeyError, TypeError, ValueError):
            raise _malformed(path, f"client {client_id!r}: expected numeric {', '.join(FEDSCALE_KEYS)}") from None
        if active.ndim != 1 or active.shape != inactive.shape:
            raise _malformed(path, f"client {client_id!r}: expected active and inactive lists of equal length")
        traces.append(np.column_stack([active, inactive]))
        periods.append(finish_time)
    return _trace_intervals(path, traces, periods)


def _read_fedscale(path: Path):
    if path.suffix == ".json":
        with _opened(path, "r") as file:
            try:
                return json.load(file)
            except ValueError:  # bad JSON or bad text encoding
                raise _malformed(path, "expected JSON of FedScale's client_behave_trace") from None
    with _opened(path, "rb") as file:
        try:
            return pickle.load(file)
        except Exception:  # unpickling can fail in many ways; all mean "not a trace pickle"
            raise _malformed(path, "expected a pickle of FedScale's client_behave_trace") from None


def _client_order(client_id):
    try:
        return (0, int(client_id), "")
    except (TypeError, ValueError):
        return (1, 0, str(client_id))


def _trace_intervals(path: Path, traces, periods) -> TraceIntervals:
    try:
        return TraceIntervals(traces=tuple(traces), period_s=tuple(periods))
    except ValueError as error:
        raise _malformed(path, str(error)) from None


def _opened(path: Path, mode: str, **options):
    try:
        return open(path, mode, **options)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such trace file") from None


def _malformed(path: Path, expected: str) -> ValueError:
    return ValueError(f"{path}: {expected}")
