"""Which shared links each device's transfers cross: its cell (if it has one) and the server's link of the
direction (if one is given), from the scenario's `network:` section (testbed/schema/network.py).

Links are numbered per direction: cells 0 .. C-1 in the order of network.cells (each kind's `count` cells in
turn), then the server's link, C. A device of the j-th place among a cell kind's devices (its groups' devices,
one group after another, in device order) is in that kind's cell j mod count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DIRECTIONS = ("down", "up")


@dataclass(frozen=True)
class Topology:
    cell: np.ndarray                  # (n,) each device's cell; -1: none
    names: tuple[str, ...]            # (C,) "lte.0", "lte.1", ...
    capacity: dict[str, np.ndarray]   # direction -> (C + 1,) the cells' capacities then the server's (inf: none)
    backhaul: tuple                   # (C,) each cell's schema Backhaul, or None

    @classmethod
    def build(cls, network, group: np.ndarray) -> "Topology":
        """network: the scenario's section; group: (n,) each device's fleet group."""
        cell = np.full(len(group), -1, dtype=np.int64)
        names, capacity, backhaul = [], {d: [] for d in DIRECTIONS}, []
        for kind in network.cells:
            members = np.flatnonzero(np.isin(group, kind.groups))
            members = np.concatenate([members[group[members] == g] for g in kind.groups])  # group after group
            cell[members] = len(names) + np.arange(len(members)) % kind.count
            for i in range(kind.count):
                names.append(f"{kind.name}.{i}")
                capacity["down"].append(kind.down_Bps)
                capacity["up"].append(kind.up_Bps)
                backhaul.append(kind.backhaul)
        server = network.server
        capacity["down"].append(server.down_Bps or math.inf)
        capacity["up"].append(server.up_Bps or math.inf)
        return cls(cell, tuple(names), {d: np.array(c, dtype=np.float64) for d, c in capacity.items()},
                   tuple(backhaul))

    @property
    def server(self) -> int:
        """The server link's index (in either direction)."""
        return len(self.names)

    def links(self, devices: np.ndarray, direction: str, server: bool = True) -> np.ndarray:
        """(k, 2) the links these devices' transfers of `direction` cross, padded with -1: their cells', and with
        `server` the server's where it has a capacity."""
        cells = self.cell[np.asarray(devices, dtype=np.int64)]
        server = self.server if server and math.isfinite(self.capacity[direction][-1]) else -1
        return np.stack([cells, np.full(len(cells), server)], axis=1)
