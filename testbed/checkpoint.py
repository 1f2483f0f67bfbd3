"""Checkpoints: what a run needs to go on after a crash, written atomically into its run folder.

A checkpoint holds the end of a round: the server state (model, optimizer moments, and every device's kept state,
read out of the client store), the bit-generator states of the selection and strategy streams, the selector's
state with the server's history of the devices (protocol["selection"]: {"history", "state"}, protocols/participation.py;
an older testbed's held "selector", its attributes: selection/base.py's resumed_state), the shared links' rows not
yet written (protocol["links"]), an asynchronous server's own state (protocol["server"], protocols/async_state.py;
an older testbed's held its fields as keys of their own, read too), the simulated clock, the
round, whether the run has finished, and the byte lengths the tables had once that round's rows were
in. Everything else a run carries from round to round is a function of the seed and the round (the fleet's
availability and capability tiers, fluctuating rates, each device's training stream), so it needs no saving; battery
levels are state, saved with the rest. `--resume` checks that the tables still hold those bytes (their sha256),
cuts them back to those lengths, which drops a torn row and the rows of rounds after the checkpoint, and plays on
from the next round: the tables end exactly as those of a run never stopped. Rows it cannot have written (a
finished run's, or not its own rounds after the checkpoint) are refused, never dropped (runlog.py).
"""
from __future__ import annotations

import io
import os
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from testbed import safe_load
from testbed.algorithms.base import ServerState
from testbed.errors import TestbedError
from testbed.paths import user_path
from testbed.store import ClientStore

FILE = "checkpoint.pt"


@dataclass
class Checkpoint:
    round: int                      # the last round played
    now: float                      # the simulated clock at its end
    state: ServerState              # clients as a plain dict {device: state}
    selection: dict                 # numpy bit_generator.state of the selection stream
    strategy_rng: dict              # ... and of the strategy's own stream
    finished: bool = False          # the run stopped after this round (rounds, time or target reached)
    tables: dict[str, int] = field(default_factory=dict)   # table file -> its byte length at this round
    digests: dict[str, str] = field(default_factory=dict)  # table file -> the sha256 of those bytes (none: older)
    scenario: str = ""              # the resolved scenario (YAML) the checkpoint belongs to
    protocol: dict = field(default_factory=dict)   # what the protocol carries on (async: tasks in flight, ...)
    resources: dict = field(default_factory=dict)  # what devices' resources carry on (battery levels)


def plain_clients(clients: MutableMapping[int, dict]) -> dict[int, dict]:
    """Every device's kept state as a dict, read without moving states between memory and disk."""
    return clients.snapshot() if isinstance(clients, ClientStore) else dict(clients)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` by `data` all at once: a crash leaves the old file or the new one, never half of one."""
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    sync_folder(path.parent)


def sync_folder(folder: Path) -> None:
    """fsync a folder, so that a rename or a new file in it survives a power cut."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(folder: Path, checkpoint: Checkpoint) -> None:
    state = checkpoint.state
    plain = ServerState(state.params, state.optimizer, plain_clients(state.clients))
    buffer = io.BytesIO()
    torch.save({**vars(checkpoint), "state": plain}, buffer)
    write_atomically(Path(folder) / FILE, buffer.getvalue())


def load(folder: Path, scenario: str) -> Checkpoint | None:
    """The run folder's checkpoint, or None where it has none; refused when it belongs to another scenario."""
    path = Path(folder) / FILE
    if not path.exists():
        return None
    # onto the CPU: a run on a GPU wrote its server's tensors as they were; the run's placement moves them back
    fields = safe_load.load(path, "checkpoint", "; run without --resume to start over", map_location="cpu")
    try:
        checkpoint = Checkpoint(**fields)
    except TypeError:  # a dict of other fields, or no dict at all
        raise TestbedError(f"{user_path(path)}: not a testbed checkpoint; run without --resume to start over") from None
    if checkpoint.scenario != scenario:
        raise TestbedError(f"{user_path(path)}: the checkpoint belongs to another version of this scenario (a field, a "
                           "--set or a fleet.catalog file's contents differ); resume with the same file, --set and "
                           "catalog, or run without --resume")
    return checkpoint
