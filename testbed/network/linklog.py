"""links.csv's rows: each shared link's summed rate over the intervals the solves give, written round by round.

A solve from t (contention.contend) replaces what earlier solves said of the links from t on (a synchronous
round's, a hierarchical round's, a probe's). So rows wait here until the round that ends after them takes them,
cut at its end where they go on past it. They wait as columns (direction, link, t_start, t_end, Bps).

An asynchronous run's dispatches add transfers to those in flight, several times an aggregation: their flows
wait in `flows` (inflight.py), which sums them into rows as each aggregation takes its own.
"""
from __future__ import annotations

import numpy as np

from testbed.network.contention import Usage
from testbed.network.inflight import InFlightLinks
from testbed.network.topology import DIRECTIONS, Topology

_CODE = {direction: code for code, direction in enumerate(DIRECTIONS)}


class LinkLog:
    def __init__(self, topology: Topology | None):
        self.topology = topology
        self.flows = InFlightLinks(topology) if topology is not None else None   # an asynchronous run's
        self._direction, self._link = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        self._start, self._end, self._bps = np.zeros(0), np.zeros(0), np.zeros(0)

    @property
    def pending(self) -> list[dict]:
        """The rows waiting, as links.csv has them (a checkpoint keeps them so)."""
        return self._rows(np.ones(len(self._link), dtype=bool), self._end)

    @pending.setter
    def pending(self, rows: list[dict]) -> None:
        index = {name: link for link, name in enumerate(self.topology.link_names)} if rows else {}
        self._direction = np.array([_CODE[row["direction"]] for row in rows], dtype=np.int64)
        self._link = np.array([index[row["link"]] for row in rows], dtype=np.int64)
        self._start, self._end, self._bps = (np.array([row[key] for row in rows], dtype=float)
                                             for key in ("t_start_s", "t_end_s", "Bps"))

    def solved(self, usage: Usage, t: float) -> None:
        """A solve from t: what was pending from t on, on the links its transfers cross, is replaced by its rows
        (a link it does not touch, another edge server's cell, keeps its own)."""
        chunks = usage.chunks
        direction = np.concatenate([np.full(len(c[1]), _CODE[c[0]]) for c in chunks]) if chunks else self._direction[:0]
        link = np.concatenate([c[1] for c in chunks]) if chunks else self._link[:0]
        touched = np.zeros((len(DIRECTIONS), len(self.topology.link_names)), dtype=bool)
        touched[direction, link] = True
        touches = touched[self._direction, self._link]
        kept = (self._start < t) | ~touches
        end = np.where(touches & ~(self._end <= t), t, self._end)   # cut at t: (row if end <= t else t)
        self._direction = np.concatenate([self._direction[kept], direction])
        self._link = np.concatenate([self._link[kept], link])
        self._start, self._end, self._bps = (np.concatenate([mine[kept]] + [c[i] for c in chunks])
                                             for mine, i in ((self._start, 2), (end, 3), (self._bps, 4)))

    def until(self, t_end: float, r: int, keep_rest: bool) -> list[dict]:
        """Round r's rows: those up to t_end, a row going on past it cut there; with keep_rest its rest is left
        pending (an aggregation's transfers go on), else dropped (a synchronous round's close cuts them)."""
        taken = self._dicts(self.flows.take(t_end), r) if self.flows is not None else []
        start, end = self._start, self._end
        if not len(start):   # an asynchronous run's rows are all in flows: a dozen numpy calls an aggregation saved
            return taken
        taken = self._rows(start < t_end, np.where(t_end < end, t_end, end), r) + taken   # min(end, t_end)
        left = (end > t_end) & keep_rest
        self._start = np.where(t_end > start, t_end, start)[left]                  # max(start, t_end)
        self._direction, self._link, self._end, self._bps = (c[left] for c in (self._direction, self._link, end,
                                                                                   self._bps))
        return taken

    def _rows(self, mask: np.ndarray, end: np.ndarray, r: int | None = None) -> list[dict]:
        """The rows of `mask` as dicts, their ends `end`; with `r`, their round first."""
        if not mask.any():   # also where there are no shared links (topology None): a checkpoint's empty list
            return []
        return self._dicts(zip([DIRECTIONS[d] for d in self._direction[mask].tolist()], self._link[mask].tolist(),
                               self._start[mask].tolist(), end[mask].tolist(), self._bps[mask].tolist()), r)

    def _dicts(self, rows, r: int | None) -> list[dict]:
        """Rows (direction, link, t_start, t_end, Bps) as links.csv's dicts (its key order); with `r`, their round
        first."""
        names, capacity = self.topology.link_names, self.topology.capacities
        dicts = [{"round": r, "link": names[link], "direction": direction, "capacity_Bps": capacity[direction][link],
                  "t_start_s": start, "t_end_s": stop, "Bps": bps} for direction, link, start, stop, bps in rows]
        if r is None:   # a checkpoint's pending rows (one literal a row: a dict union each costs links.csv a tenth)
            for row in dicts:
                del row["round"]
        return dicts
