"""An offline W&B run read back where it lies, without W&B's server: `--track wandb` runs offline by default, and
W&B's Python API (wandb.Api) reads only runs uploaded to a server (`wandb sync`).

    from testbed.trackers.wandb_offline import read_offline_run
    run = read_offline_run("runs/quickstart/0")       # or its wandb/ folder, offline-run-* folder or run-*.wandb
    run.history.plot(x="sim_time_s", y="accuracy")    # one row a round (_step), as wandb.Api's run.history()

What it holds: history (a DataFrame, one row a run.log: _step, _runtime, _timestamp and the metrics logged,
NaN where a row did not log one), config, summary (its last values), files (their paths as saved),
defined (define_metric: a metric's name or glob -> its step metric, "" where none), project, group, name,
run_id, and exit_code (None while the run is going on: a run still writing is read as far as it got).

The file: run-<id>.wandb, a log of W&B's own record protobufs (wandb.proto.wandb_internal_pb2.Record) in
LevelDB's log format: a 7-byte header (":W&B", magic 0xBEE1, version 0), then 32 KiB blocks of chunks, each
with a 7-byte header (crc32c, length, type: full, first, middle, last). wandb 0.31 ships no Python reader of it
(wandb.sdk.internal.datastore went with its Go core); its own tools read it from the command line:
`wandb leet FOLDER` (a terminal view) and `wandb leet inspect --json FOLDER` (the records as JSON lines).
The checksums are not checked; a record cut by the end of the file (a run still writing) ends the reading.
"""
from __future__ import annotations

import json
import struct
import time
from pathlib import Path

from testbed.errors import TestbedError

BLOCK = 32 * 1024
HEADER = struct.Struct("<IHB")
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
MAGIC = b":W&B"


def read_offline_run(path: str | Path, wait_s: float = 0.0):
    """The offline run at `path` (see the module's docstring): a run-*.wandb file, W&B's folder of one run
    (offline-run-<time>-<id>), a wandb/ folder holding one, or a folder holding that wandb/ (a run folder). A path
    holding several runs (a run resumed: one W&B run each time) is refused, naming them. wait_s: W&B's core
    process writes the file behind a buffer, so that just after run.finish() returns its end may still be coming:
    read again until the run's exit record is there, for at most wait_s seconds."""
    file = run_file(Path(path))
    deadline = time.monotonic() + wait_s
    while True:
        run = OfflineRun(file)
        if run.exit_code is not None or time.monotonic() >= deadline:
            return run
        time.sleep(0.05)


def run_file(path: Path) -> Path:
    if path.is_file():
        return path
    for pattern in ("run-*.wandb", "*/run-*.wandb", "wandb/*/run-*.wandb"):
        found = sorted({p.resolve() for p in path.glob(pattern)})   # wandb/latest-run links to one of them
        if len(found) == 1:
            return found[0]
        if found:
            raise TestbedError(f"{path}: holds {len(found)} W&B runs; name one: "
                               + ", ".join(str(p.parent) for p in found))
    raise TestbedError(f"{path}: no W&B run here (no run-*.wandb in it, in its subfolders or under its wandb/)")


def chunks(data: bytes):
    """The records' bytes, joined from their chunks; a chunk cut by the end of the data ends them."""
    pos, pending = 7, b""
    while pos + HEADER.size <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER.size:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = HEADER.unpack_from(data, pos)
        pos += HEADER.size
        if (kind == 0 and length == 0) or pos + length > len(data):  # zeroes: the file's unwritten end
            return
        chunk, pos = data[pos:pos + length], pos + length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk


def records(file: Path) -> list:
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2

    data = Path(file).read_bytes()
    if data[:len(MAGIC)] != MAGIC:
        raise TestbedError(f"{file}: not a W&B run file (it does not start with ':W&B')")
    out = []
    for raw in chunks(data):
        record = wandb_internal_pb2.Record()
        try:
            record.ParseFromString(raw)
        except DecodeError:  # a record still being written
            break
        out.append(record)
    return out


def items(update) -> dict:
    """A history, config or summary record's items: {key (nested keys dotted): value}."""
    return {item.key or ".".join(item.nested_key): json.loads(item.value_json) for item in update}


class OfflineRun:
    """What an offline run logged; see the module's docstring."""

    def __init__(self, file: Path):
        import pandas as pd

        self.file = Path(file)
        rows, self.config, self.summary, self.files, self.defined = [], {}, {}, [], {}
        self.project = self.group = self.name = self.run_id = ""
        self.exit_code = None
        for record in records(file):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run = record.run
                self.project, self.group, self.name, self.run_id = (run.project, run.run_group, run.display_name,
                                                                    run.run_id)
                self.config |= items(run.config.update)
            elif kind == "history":
                rows.append(items(record.history.item))
            elif kind in ("config", "summary"):
                getattr(self, kind).update(items(getattr(record, kind).update))
            elif kind == "files":
                self.files += [f.path for f in record.files.files]
            elif kind == "metric":
                self.defined[record.metric.name or record.metric.glob_name] = record.metric.step_metric
            elif kind == "exit":
                self.exit_code = record.exit.exit_code
        history = pd.DataFrame(rows)
        first = [c for c in ("_step", "sim_time_s") if c in history.columns]   # the step and the time axis
        self.history = history[first + [c for c in history.columns if c not in first]]

    def __repr__(self) -> str:
        return (f"OfflineRun({self.file.parent}: {self.name or self.run_id} in project {self.project}, "
                f"{len(self.history)} history rows, exit code {self.exit_code})")
