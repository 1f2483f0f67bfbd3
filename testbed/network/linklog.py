"""links.csv's rows: each shared link's summed rate over the intervals the solves give, written round by round.

A solve from t (contention.contend) replaces what earlier solves said of the links from t on: an asynchronous
dispatch adds transfers to those in flight. So rows wait here until the round (aggregation) that ends after them
takes them, cut at its end where they go on past it.
"""
from __future__ import annotations

from testbed.network.contention import Usage
from testbed.network.topology import Topology


class LinkLog:
    def __init__(self, topology: Topology | None):
        self.topology = topology
        self.pending: list[dict] = []

    def solved(self, usage: Usage, t: float) -> None:
        """A solve from t: what was pending from t on, on the links its transfers cross, is replaced by its rows
        (a link it does not touch, another edge server's cell, keeps its own)."""
        topo = self.topology
        names, capacity = topo.link_names, {d: c.tolist() for d, c in topo.capacity.items()}
        touched = {(direction, names[link]) for direction, link in {row[:2] for row in usage.rows}}
        kept = [row if row["t_end_s"] <= t or (row["direction"], row["link"]) not in touched
                else row | {"t_end_s": t} for row in self.pending
                if row["t_start_s"] < t or (row["direction"], row["link"]) not in touched]
        self.pending = kept + [
            {"link": names[link], "direction": direction, "capacity_Bps": capacity[direction][link],
             "t_start_s": start, "t_end_s": end, "Bps": bps}
            for direction, link, start, end, bps in usage.rows]

    def until(self, t_end: float, r: int, keep_rest: bool) -> list[dict]:
        """Round r's rows: those up to t_end, a row going on past it cut there; with keep_rest its rest is left
        pending (an aggregation's transfers go on), else dropped (a synchronous round's close cuts them)."""
        taken, left = [], []
        for row in self.pending:
            if row["t_start_s"] < t_end:
                taken.append({"round": r, **row, "t_end_s": min(row["t_end_s"], t_end)})
            if row["t_end_s"] > t_end:
                left.append(row | {"t_start_s": max(row["t_start_s"], t_end)})
        self.pending = left if keep_rest else []
        return taken
