"""Which shared links each device's transfers cross: its cell (if it has one), the cell's backhaul (where its kind
has one) and the server's link of the direction (if one is given), from the scenario's `network:` section
(testbed/schema/network.py). A transfer to and from the cell's edge server (hierarchical aggregation) crosses
its cell alone.

Links are numbered per direction: cells 0 .. C-1 in the order of network.cells (each kind's `count` cells in
turn), their backhauls C .. 2C-1 (infinite capacity where a kind has none: never crossed), then the server's
link, 2C. A device of the j-th place among a cell kind's devices (its groups' devices, one group after another,
in device order) is in that kind's cell j mod count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

DIRECTIONS = ("down", "up")


@dataclass(frozen=True)
class Topology:
    cell: np.ndarray                  # (n,) each device's cell; -1: none
    names: tuple[str, ...]            # (C,) "lte.0", "lte.1", ...
    capacity: dict[str, np.ndarray]   # direction -> (2C + 1,) the cells', their backhauls', the server's (inf: none)
    backhaul: tuple                   # (C,) each cell's schema Backhaul, or None

    @classmethod
    def build(cls, network, group: np.ndarray) -> "Topology":
        """network: the scenario's section; group: (n,) each device's fleet group."""
        cell = np.full(len(group), -1, dtype=np.int64)
        names, capacity, backhaul = [], {d: [] for d in DIRECTIONS}, []
        for kind in network.cells:
            members = np.concatenate([np.flatnonzero(group == g) for g in kind.groups])   # group after group
            cell[members] = len(names) + np.resize(np.arange(kind.count), len(members))   # j mod count
            for i in range(kind.count):
                names.append(f"{kind.name}.{i}")
                capacity["down"].append(kind.down_Bps)
                capacity["up"].append(kind.up_Bps)
                backhaul.append(kind.backhaul)
        for direction in DIRECTIONS:
            capacity[direction] += [getattr(b, f"{direction}_Bps") if b else math.inf for b in backhaul]
        server = network.server
        capacity["down"].append(server.down_Bps or math.inf)
        capacity["up"].append(server.up_Bps or math.inf)
        return cls(cell, tuple(names), {d: np.array(c, dtype=np.float64) for d, c in capacity.items()},
                   tuple(backhaul))

    @property
    def server(self) -> int:
        """The server link's index (in either direction)."""
        return 2 * len(self.names)

    def link_name(self, link: int) -> str:
        return self.link_names[link]

    @cached_property
    def link_names(self) -> tuple[str, ...]:
        """Every link's name, by index: its cell's, the cell's backhaul's, or "server" (links.csv names rows by
        them, a few thousand rows a dispatch at 100 cells)."""
        return self.names + tuple(f"{name}.backhaul" for name in self.names) + ("server",)

    def links(self, devices: np.ndarray, direction: str, server: bool = True) -> np.ndarray:
        """(k, 3) the links these devices' transfers of `direction` cross, padded with -1: their cells', and with
        `server` (to and from the server, not an edge server) their cells' backhauls and the server's, where those
        have a capacity. Rows of a table made once per cell (its last row: no cell, index -1): an asynchronous
        dispatch asks for the ~100 tasks in flight, twice."""
        return self._table(direction, server)[self.cell[np.asarray(devices, dtype=np.int64)]]

    def link_rows(self, devices: list[int], direction: str) -> list[list[int]]:
        """links(devices, direction) as Python lists, for a few devices (a dispatch's new tasks)."""
        return [self.link_row(d, direction) for d in devices]

    def link_row(self, device: int, direction: str) -> list[int]:
        """links([device], direction)[0] as a Python list (a dispatch's new task, four times)."""
        return self._link_lists[direction][self.cell[device]]

    def link_limit(self, device: int, direction: str) -> float:
        """The smallest capacity among link_row(device, direction)'s links (inf where it names none)."""
        return self._link_limits[direction][self.cell[device]]

    def _table(self, direction: str, server: bool) -> np.ndarray:
        """Each cell's row of links(..., direction, server), by cell; the last row (index -1): no cell."""
        key = (direction, server)
        table = self._link_tables.get(key)
        if table is None:
            table = self._link_tables[key] = self._links_of(np.append(np.arange(len(self.names)), -1), direction,
                                                            server)
        return table

    @cached_property
    def capacities(self) -> dict[str, list[float]]:
        """capacity as Python floats (a dispatch's few flows are solved in Python floats)."""
        return {direction: capacity.tolist() for direction, capacity in self.capacity.items()}

    @cached_property
    def _link_lists(self) -> dict[str, list[list[int]]]:
        # _table(direction, server=True) as Python lists
        return {direction: self._table(direction, True).tolist() for direction in DIRECTIONS}

    @cached_property
    def _link_limits(self) -> dict[str, list[float]]:
        # per cell (the last: no cell), the smallest capacity of its row of _link_lists
        return {direction: [min([self.capacities[direction][link] for link in row if link >= 0], default=math.inf)
                            for row in rows] for direction, rows in self._link_lists.items()}

    @cached_property
    def _link_tables(self) -> dict[tuple[str, bool], np.ndarray]:
        return {}

    def _links_of(self, cells: np.ndarray, direction: str, server: bool) -> np.ndarray:
        capacity = self.capacity[direction]
        backhaul = np.where(cells >= 0, cells + len(self.names), -1)
        if not server:
            backhaul = np.full(len(cells), -1)
        else:
            backhaul[backhaul >= 0] = np.where(np.isfinite(capacity[backhaul[backhaul >= 0]]),
                                               backhaul[backhaul >= 0], -1)
        out = self.server if server and math.isfinite(capacity[-1]) else -1
        return np.stack([cells, backhaul, np.full(len(cells), out)], axis=1)
