"""Shared links of a run with a `network:` section (links.csv): each link's utilisation over simulated time.

links.csv holds, per round, each shared link's summed rate of transfers over intervals of constant rate (the
fluid model's instants: testbed/network/). The plot shows, per direction, the server's link and the busiest
cells (by bytes carried) as a share of their capacity.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import PercentFormatter

from analysis.plots import _save
from analysis.runs import Run

BUSIEST = 4  # cells drawn per direction, besides the server's link
ROUNDS = 5   # rounds (aggregations) drawn: over a whole run the steps are too dense to read, as the Gantt's


def busiest_links(links: pd.DataFrame, direction: str, cells: int = BUSIEST) -> list[str]:
    """The server's link (where it has a capacity) and the `cells` links of this direction that carried the most
    bytes, in that order."""
    rows = links[links["direction"] == direction]
    carried = (rows["Bps"] * (rows["t_end_s"] - rows["t_start_s"])).groupby(rows["link"], sort=False).sum()
    server = [name for name in carried.index if name == "server"]
    ranked = carried.drop(server).sort_values(ascending=False, kind="stable")
    return server + list(ranked.index[:cells])


def steps(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """A link's intervals as a step line of its utilisation (rate / capacity), at 0 between intervals."""
    xs, ys, last = [], [], None
    for start, end, share in zip(rows["t_start_s"], rows["t_end_s"], rows["Bps"] / rows["capacity_Bps"]):
        if last is not None and start > last:
            xs += [last, start]
            ys += [0.0, 0.0]
        xs += [start, end]
        ys += [share, share]
        last = end
    return np.array(xs), np.array(ys)


def plot_links(run: Run, path, rounds: int = ROUNDS) -> Path:
    """Per direction (downlinks, uplinks), the utilisation of the server's link and of the busiest cells, over the
    first `rounds` rounds (aggregations)."""
    links = run.links if run.links is not None else pd.DataFrame(columns=["direction", "round"])
    links = links[links["round"] <= rounds]
    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for ax, direction, title in zip(axes, ("down", "up"), ("downloads: the server's egress and cells' downlinks",
                                                            "uploads: the server's ingress and cells' uplinks")):
        shown = busiest_links(links, direction) if not links.empty else []
        for name in shown:
            rows = links[(links["direction"] == direction) & (links["link"] == name)].sort_values("t_start_s",
                                                                                                 kind="stable")
            xs, ys = steps(rows)
            ax.plot(xs, ys, linewidth=1, label=name)
        if shown:
            ax.legend(loc="upper right", fontsize="small")
        else:
            ax.text(0.5, 0.5, "no shared link carried a transfer", transform=ax.transAxes, ha="center", va="center")
        ax.set_ylabel("Utilisation")
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
        ax.set_ylim(0, 1.05)
        ax.set_title(title, fontsize="medium")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("Simulated time (s)")
    axes[-1].set_xlim(left=0)
    fig.suptitle(f"{run.label}: shared links in the first {rounds} rounds, the server's and the busiest cells")
    return _save(fig, path)
