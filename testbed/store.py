"""Per-device state that outlives a round: optimizer moments, tracking variables, masks, bandit statistics.

`ClientStore` maps a device id to its state (a dict of tensors, numpy arrays and plain values). With
`max_in_memory=N` it holds at most N states in memory, the N used most recently, and spills the others to
disk (`torch.save`, one file per device) in a folder it owns: a temporary folder, or `folder` when given.
Reading a spilled device loads it back, transparently, and makes it the most recently used; its file is then
removed, so each state lives in exactly one place. `max_in_memory=None` keeps everything in memory.

A state you read is the store's own object while it stays in memory; after changing it, write it back
(`store[d] = state`): a spilled device keeps what it held when it was spilled. `close()` (or leaving a
`with` block) removes the spill files and the folder the store created.

The performance rule of DESIGN.md: 100,000 devices with an Adam moment each would not fit in memory; the
store bounds what is resident to the devices of the last few rounds.
"""
from __future__ import annotations

import operator
import shutil
import tempfile
import weakref
from collections import OrderedDict
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import torch

from testbed import safe_load

State = dict[str, Any]


class ClientStore(MutableMapping):
    def __init__(self, max_in_memory: int | None = None, folder: str | Path | None = None):
        if max_in_memory is not None and (not isinstance(max_in_memory, int) or max_in_memory < 1):
            raise ValueError(f"max_in_memory must be a positive integer or None (unlimited), got {max_in_memory!r}")
        self.max_in_memory = max_in_memory
        self._memory: OrderedDict[int, State] = OrderedDict()   # least recently used first
        self._on_disk: set[int] = set()
        self._given_folder = folder is not None
        self._folder: Path | None = None
        if folder is not None:
            self._folder = Path(folder)
            self._created = not self._folder.exists()
            self._folder.mkdir(parents=True, exist_ok=True)
        self._closed = False
        self._cleanup: weakref.finalize | None = None

    # ---- the mapping -----------------------------------------------------------------------------------
    def __getitem__(self, device: int) -> State:
        device = self._key(device)
        if device in self._memory:
            self._memory.move_to_end(device)
            return self._memory[device]
        if device not in self._on_disk:
            raise KeyError(device)
        path = self._path(device)
        state = safe_load.load(path, "spilled device state")
        path.unlink()
        self._on_disk.discard(device)
        self._memory[device] = state
        self._evict()
        return state

    def __setitem__(self, device: int, state: State) -> None:
        device = self._key(device)
        if device in self._on_disk:
            self._path(device).unlink()
            self._on_disk.discard(device)
        self._memory[device] = state
        self._memory.move_to_end(device)
        self._evict()

    def __delitem__(self, device: int) -> None:
        device = self._key(device)
        if device in self._memory:
            del self._memory[device]
        elif device in self._on_disk:
            self._path(device).unlink()
            self._on_disk.discard(device)
        else:
            raise KeyError(device)

    def __contains__(self, device: object) -> bool:  # never loads
        try:
            device = operator.index(device)
        except TypeError:
            return False
        return device in self._memory or device in self._on_disk

    def __len__(self) -> int:
        return len(self._memory) + len(self._on_disk)

    def __iter__(self) -> Iterator[int]:
        """Device ids in increasing order (a snapshot: the store may change while you iterate)."""
        return iter(sorted(self._memory.keys() | self._on_disk))

    # ---- what is where ---------------------------------------------------------------------------------
    @property
    def in_memory(self) -> list[int]:
        """Devices held in memory, least recently used first."""
        return list(self._memory)

    @property
    def spilled(self) -> list[int]:
        """Devices held on disk, in increasing order."""
        return sorted(self._on_disk)

    def snapshot(self) -> dict[int, State]:
        """Every device's state, by device, read without moving any between memory and disk (a checkpoint)."""
        self._key(0)  # refuses a closed store
        return {d: self._memory[d] if d in self._memory else safe_load.load(self._path(d), "spilled device state")
                for d in self}

    @property
    def folder(self) -> Path | None:
        """Where spilled states go; a temporary folder is created at the first spill."""
        return self._folder

    # ---- lifetime --------------------------------------------------------------------------------------
    def close(self) -> None:
        """Drop every state; remove the spill files and the folder the store created. Idempotent."""
        if self._closed:
            return
        self._memory.clear()
        if self._cleanup is not None:       # a temporary folder: remove it whole
            self._cleanup()
        elif self._folder is not None:      # a given folder: remove our files, and the folder if we made it
            for device in self._on_disk:
                self._path(device).unlink(missing_ok=True)
            if self._created and not any(self._folder.iterdir()):
                self._folder.rmdir()
        self._on_disk.clear()
        self._closed = True

    def __enter__(self) -> "ClientStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ClientStore({len(self)} devices: {len(self._memory)} in memory, {len(self._on_disk)} on disk, "
                f"max_in_memory={self.max_in_memory})")

    # ---- internals -------------------------------------------------------------------------------------
    def _key(self, device) -> int:
        if self._closed:
            raise ValueError("this ClientStore is closed")
        return operator.index(device)  # ints and numpy integers; a float id is an error

    def _path(self, device: int) -> Path:
        return self._folder / f"device_{device}.pt"

    def _evict(self) -> None:
        if self.max_in_memory is None:
            return
        while len(self._memory) > self.max_in_memory:
            device, state = self._memory.popitem(last=False)
            self._spill(device, state)

    def _spill(self, device: int, state: State) -> None:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="testbed-store-"))
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._folder, ignore_errors=True)
        torch.save(state, self._path(device))
        self._on_disk.add(device)
