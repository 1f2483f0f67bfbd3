"""The records of an offline W&B run (run-<id>.wandb), read back for the tests: wandb 0.31 ships no Python reader
(wandb.sdk.internal.datastore went with the Go core), so this reads the file's format, LevelDB's log: a 7-byte
header (":W&B", magic 0xBEE1, version 0), then 32 KiB blocks of chunks, each with a 7-byte header (crc32c, length,
type: full, first, middle, last), holding wandb_internal_pb2.Record protobufs. The checksums are not checked."""
from __future__ import annotations

import json
import struct
import time
from pathlib import Path

BLOCK = 32 * 1024
HEADER = struct.Struct("<IHB")
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def chunks(data: bytes):
    """The records' bytes, joined from their chunks."""
    assert data[:4] == b":W&B", "not a .wandb file"
    pos, pending = 7, b""
    while pos + HEADER.size <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER.size:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = HEADER.unpack_from(data, pos)
        pos += HEADER.size
        if kind == 0 and length == 0:  # zeroes: the file's unwritten end
            break
        chunk, pos = data[pos:pos + length], pos + length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk


def records(run_file: Path) -> list:
    from wandb.proto import wandb_internal_pb2

    out = []
    for raw in chunks(Path(run_file).read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        out.append(record)
    return out


def key(item) -> str:
    return item.key or ".".join(item.nested_key)


class OfflineRun:
    """What an offline run logged: run (the run record), history (one dict a log call), config, summary (the last
    summary record's values), files (their paths as saved), metrics (define_metric records), exit_code."""

    def __init__(self, run_file: Path):
        self.history, self.config, self.summary, self.files, self.metrics = [], {}, {}, [], []
        self.run, self.exit_code = None, None
        for record in records(run_file):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                self.run = record.run
                self.config |= {key(i): json.loads(i.value_json) for i in record.run.config.update}
            elif kind == "history":
                self.history.append({key(i): json.loads(i.value_json) for i in record.history.item})
            elif kind == "config":
                self.config |= {key(i): json.loads(i.value_json) for i in record.config.update}
            elif kind == "summary":
                self.summary |= {key(i): json.loads(i.value_json) for i in record.summary.update}
            elif kind == "files":
                self.files += [f.path for f in record.files.files]
            elif kind == "metric":
                self.metrics.append(record.metric)
            elif kind == "exit":
                self.exit_code = record.exit.exit_code


def offline_run(folder: Path, wait_s: float = 20.0) -> OfflineRun:
    """The one offline run under folder/wandb/, once its exit record is written: W&B's core process writes the file
    behind a buffer, and on a loaded machine run.finish() can return before it has written it all."""
    found = sorted(Path(folder).glob("wandb/offline-run-*/run-*.wandb"))
    assert len(found) == 1, f"expected one offline run under {folder}, found {found}"
    deadline = time.monotonic() + wait_s
    while True:
        run = OfflineRun(found[0])
        if run.exit_code is not None or time.monotonic() > deadline:
            return run
        time.sleep(0.05)
