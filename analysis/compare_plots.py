"""The plots that set groups of runs against each other: accuracy against simulated time (and energy, where
accounted) with seed bands, time to each target against the heterogeneity level, where the selected devices' time
went in each group (the whole fleet's time where some run is async), and for each group's first run the
participation heat map (device x round) and the device timeline."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from analysis.metrics import UTILISATION_PARTS, device_phases, device_utilisation, natural_order, round_breakdown
from analysis.plots import (ASYNC_CUTS, CUT_LABELS, CUT_STYLES, SYNC_CUTS, UTILISATION_COLOURS, _save,
                            accuracy_metric, breakdown_colours, plot_accuracy_mean, plot_gantt, plot_stacked_shares,
                            plotted_axes)
from analysis.report import file_safe
from analysis.runs import Run, device_classes

HETEROGENEITY = "fleet.heterogeneity"   # the compare table's column of the level, where the groups differ in it
LEVELS = ("low", "medium", "high")
GROUP_AXES = ("time", "energy")  # the groups' accuracy curves against these (energy: where some run accounts it)
# A device's part in a round, from events.csv: the outcome of its cut phase, or done.
PARTICIPATION = {
    "not selected": ("white", 0),
    "used (arrived in the first K)": ("tab:green", 1),
    CUT_LABELS["surplus"]: (CUT_STYLES["surplus"]["facecolor"], 2),
    CUT_LABELS["late"]: (CUT_STYLES["late"]["facecolor"], 3),
    CUT_LABELS["dropped"]: (CUT_STYLES["dropped"]["facecolor"], 4),
    CUT_LABELS["stale"]: (CUT_STYLES["stale"]["facecolor"], 5),
    CUT_LABELS["unfinished"]: ("tab:purple", 6),
}
OUTCOME_CODES = {"done": 1, "surplus": 2, "late": 3, "dropped": 4, "stale": 5, "unfinished": 6}
# An async run's cells are aggregation windows: a device's tasks that ended in it.
ASYNC_PARTICIPATION_LABELS = {"not selected": "no task ended in this window", "used (arrived in the first K)":
                              "used (aggregated)"}
MAX_DEVICE_TICKS = 40


def write_compare_plots(groups: dict[str, list[Run]], table: pd.DataFrame, targets: list[float], out_dir,
                        metric: str, timelines: bool = True, curves: bool = True) -> list[Path]:
    """Every plot of this module into out_dir; the heterogeneity plot only where groups differ in level, the
    Gantt timelines (of each group's first run) only with `timelines`, the accuracy curves only with `curves`.
    Returns the paths."""
    out_dir = Path(out_dir)
    runs = [run for members in groups.values() for run in members]
    written = [plot_accuracy_mean(runs, x, out_dir / f"{metric}_by_group_vs_{x}.png", metric, groups=groups)
               for x in plotted_axes(runs) if x in GROUP_AXES and curves]
    if HETEROGENEITY in table and table[HETEROGENEITY].nunique() > 1:
        written += [plot_tta_vs_heterogeneity(table, target, out_dir / f"tta_vs_heterogeneity_{target:g}.png",
                                              metric) for target in targets]
    written.append(plot_group_breakdown(groups, out_dir / "breakdown_by_group.png"))
    for label, members in groups.items():
        name = group_file_name(label)
        written.append(plot_participation(members[0], out_dir / f"participation_{name}.png"))
        if timelines:
            written.append(plot_gantt(members[0], out_dir / f"gantt_{name}.png"))
    return written


def group_file_name(label: str) -> str:
    """A group label as a file name part: "fedavg, heterogeneity=high" -> "fedavg_heterogeneity-high"."""
    return file_safe(label.replace(", ", "_").replace("=", "-"))


def plot_tta_vs_heterogeneity(table: pd.DataFrame, target: float, path, metric: str = "accuracy") -> Path:
    """Mean time for `metric` to reach `target` over the seeds that reached it (error bar: sample std) at each
    heterogeneity level, one line per group of the other fields (the algorithm, usually); a level no seed
    reached has no point."""
    what = accuracy_metric(metric)[0].lower()
    fields = list(table.columns[1:list(table.columns).index("seeds")])
    series = [f for f in fields if f != HETEROGENEITY]
    rows = table[table[HETEROGENEITY].isin(LEVELS)]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lines = list(rows.groupby(series, sort=False, dropna=False)) if series else [((), rows)]
    for n, (values, points) in enumerate(lines):
        x = points[HETEROGENEITY].map(LEVELS.index).to_numpy() + 0.04 * (n - (len(lines) - 1) / 2)
        time = points[f"time_s@{target:g}"].to_numpy()
        spread = np.nan_to_num(points[f"time_s@{target:g}_std"].to_numpy())
        label = ", ".join(map(str, values if isinstance(values, tuple) else (values,))) or "runs"
        ax.errorbar(x, time, yerr=spread, marker="o", capsize=4, label=label)
    ax.set_xticks(range(len(LEVELS)), LEVELS)
    ax.set_xlabel("Heterogeneity (capability tiers: first 2, 3 or all 5)")
    ax.set_ylabel(f"Simulated time to {target:.0%} {what} (s)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Time to {target:.0%} {what}, mean ± std over the seeds that reached it")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return _save(fig, path)


def plot_group_breakdown(groups: dict[str, list[Run]], path) -> Path:
    """One bar per group: the share of its selected devices' time (all rounds, all seeds) spent computing,
    communicating, on work thrown away, and waiting for the round to end (stragglers) or offline. Where some
    run is async (its rounds are aggregation windows, which tasks span), plot_group_utilisation instead."""
    if any(run.is_async for members in groups.values() for run in members):
        return plot_group_utilisation(groups, path)
    seconds = pd.DataFrame({label: sum(round_breakdown(run.rounds, run.events).sum() for run in members)
                            for label, members in groups.items()}).T.fillna(0.0)   # backhaul_s: hierarchical
    return plot_stacked_shares(seconds, breakdown_colours(seconds),
                               "Share of the selected devices' time, all rounds and seeds",
                               "Where round time went: compute, communication, waiting for stragglers", path)


def plot_group_utilisation(groups: dict[str, list[Run]], path) -> Path:
    """One bar per group: the share of its whole fleet's time (every device over each run's span, all seeds)
    spent computing, communicating, on wasted work, idle while an update waited for aggregation, and otherwise
    idle (metrics.device_utilisation), so that sync and async groups compare."""
    seconds = pd.DataFrame({label: sum(device_utilisation(run.rounds, run.events, device_classes(run).index)
                                       [list(UTILISATION_PARTS)].sum() for run in members)
                            for label, members in groups.items()}).T.fillna(0.0)   # backhaul_s: hierarchical
    return plot_stacked_shares(seconds, UTILISATION_COLOURS, "Share of all devices' time over the run, all seeds",
                           "Where device time went: compute, communication, wasted, waiting for aggregation, idle",
                           path)


def participation(run: Run) -> pd.DataFrame:
    """Device x round: 0 not selected, 1 used, 2 surplus, 3 late, 4 dropped, 5 stale, 6 unfinished
    (OUTCOME_CODES; async runs: the tasks that ended in each aggregation window, the highest code); the devices
    selected at least once, in natural order; every round of rounds.csv. Phases other than the devices' own
    (a server's) are left out."""
    events = device_phases(run.events)
    codes = events["outcome"].map(OUTCOME_CODES).fillna(0).astype(int)
    cells = codes.groupby([events["device"], events["round"]]).max().unstack("round")
    devices = sorted(cells.index, key=natural_order)
    return cells.reindex(index=devices, columns=run.rounds["round"]).fillna(0).astype(int)


def plot_participation(run: Run, path) -> Path:
    """participation(run) as a heat map: who was selected in each round, and whose update was used, cut as
    surplus, late, or dropped (async runs: used, dropped, stale or unfinished, per aggregation window)."""
    cells = participation(run)
    colours = [colour for colour, _ in PARTICIPATION.values()]
    fig, ax = plt.subplots(figsize=(max(6, min(14, 0.12 * cells.shape[1] + 4)),
                                    min(12, 1.8 + 0.14 * max(len(cells), 1))))
    ax.imshow(cells.to_numpy(), aspect="auto", interpolation="nearest", cmap=ListedColormap(colours),
              norm=BoundaryNorm(np.arange(len(colours) + 1) - 0.5, len(colours)),
              extent=(cells.columns.min() - 0.5, cells.columns.max() + 0.5, len(cells) - 0.5, -0.5))
    if len(cells) <= MAX_DEVICE_TICKS:
        ax.set_yticks(range(len(cells)), [str(device) for device in cells.index], fontsize="small")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("Aggregation" if run.is_async else "Round")
    ax.set_ylabel(f"Device ({len(cells)} selected at least once)")
    ax.set_title(f"{run.label}: participation and dropouts")
    shown = [*list(PARTICIPATION)[:2], *(CUT_LABELS[cut] for cut in (ASYNC_CUTS if run.is_async else SYNC_CUTS))]
    names = ASYNC_PARTICIPATION_LABELS if run.is_async else {}
    legend = [Patch(facecolor=PARTICIPATION[label][0], edgecolor="0.5", label=names.get(label, label))
              for label in sorted(shown, key=lambda label: PARTICIPATION[label][1])]
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    return _save(fig, path)
