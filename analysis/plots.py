"""The run plots: accuracy against cost (per run, and per scenario averaged over seeds), a per-device
timeline, where device time went (per round; per device class), and the staleness of async updates. Each
function writes one PNG and returns its path."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, NamedTuple

import matplotlib

matplotlib.use("Agg")  # files only, never a window: runs on headless machines and in CI

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import EngFormatter, MaxNLocator, PercentFormatter  # noqa: E402

from analysis.intervals import mean_intervals  # noqa: E402
from analysis.metrics import (BACKHAUL_PHASES, IDLE_PHASE, UTILISATION_PARTS, device_phases,  # noqa: E402
                              device_utilisation, natural_order, numeric, round_breakdown, task_ids)
from analysis.runs import Run, device_classes, run_labels, scenario_groups  # noqa: E402
from analysis.scales import LOGIT  # noqa: E402

DPI = 120



class AccuracyAxis(NamedTuple):
    """An x-axis choice of plot_accuracy."""
    what: str
    label: str
    column: str  # the rounds.csv column it is drawn from: a run without it (energy off) has no line
    x_of: Callable[[pd.DataFrame], pd.Series]  # its value at the end of every round
    formatter: Callable | None = None  # tick labels, where plain numbers would be unreadable


ACCURACY_AXES = {
    "time": AccuracyAxis("simulated time", "Simulated time (s)", "t_end_s", lambda rounds: rounds["t_end_s"]),
    "bytes_up": AccuracyAxis("uplink bytes", "Cumulative uplink (MB)", "bytes_up",
                             lambda rounds: rounds["bytes_up"].cumsum() / 1e6),
    # "20 T" rather than an offset "1e13"
    "flops": AccuracyAxis("training FLOPs", "Cumulative training FLOPs", "flops",
                          lambda rounds: rounds["flops"].cumsum(), EngFormatter),
    # every device phase's joules (idle waits too where the run counts them), wasted work included
    "energy": AccuracyAxis("energy", "Cumulative device energy", "energy_J",
                           lambda rounds: rounds["energy_J"].cumsum(), lambda: EngFormatter(unit="J")),
}
# rounds.csv columns the accuracy plots can draw: title word and y axis label.
ACCURACY_METRICS = {
    "accuracy": ("Accuracy", "Test accuracy"),
    "local_accuracy": ("Local accuracy", "Local test accuracy (mean over devices)"),
}

PHASE_STYLES = {
    "download": {"facecolor": "tab:blue"},
    "compute": {"facecolor": "tab:orange"},
    "upload": {"facecolor": "tab:green"},
    "server": {"facecolor": "tab:purple"},  # the server's own work, on row -1 (FedDU's steps, FedAP's pruning)
    IDLE_PHASE: {"facecolor": "#f3efe0", "edgecolor": "#b5ad8f"},  # light: waiting, beside the work that matters
    # an edge server's transfers to and from the cloud (hierarchical runs), on the edge's row
    "backhaul_down": {"facecolor": "tab:cyan", "edgecolor": "teal"},
    "backhaul_up": {"facecolor": "tab:pink", "edgecolor": "palevioletred"},
}
PHASE_LABELS = {IDLE_PHASE: "idle (waiting for the round to close)", "backhaul_down": "backhaul down (cloud to edge)",
                "backhaul_up": "backhaul up (edge to cloud)"}
SHOWN_WHEN_LOGGED = (IDLE_PHASE, *BACKHAUL_PHASES)   # in the Gantt's legend only where the run has such phases
# A cut phase is drawn in its outcome's style, whatever the phase: the cut is what the reader looks for.
CUT_STYLES = {
    "dropped": {"facecolor": "tab:red", "edgecolor": "darkred", "hatch": "///"},
    "late": {"facecolor": "0.45", "edgecolor": "0.25", "hatch": ".."},
    "surplus": {"facecolor": "0.75", "edgecolor": "0.5"},
    "stale": {"facecolor": "khaki", "edgecolor": "darkgoldenrod", "hatch": "xx"},
    "unfinished": {"facecolor": "white", "edgecolor": "0.3", "hatch": "\\\\"},
}
CUT_LABELS = {"dropped": "dropped (went offline)", "late": "late (deadline)", "surplus": "surplus (over-commit)",
              "stale": "stale (over max_staleness)", "unfinished": "unfinished (cut at the run's end)"}
# The cuts each protocol can make, in the Gantt's legend.
SYNC_CUTS, ASYNC_CUTS = ("dropped", "late", "surplus"), ("dropped", "stale", "unfinished")

BREAKDOWN_COLOURS = {
    "compute_s": ("compute", "tab:orange"),
    "communication_s": ("communication", "tab:blue"),
    "wasted_s": ("wasted (dropped / late / surplus)", "tab:red"),
    "backhaul_s": ("waiting on the edge's backhaul", "tab:cyan"),   # hierarchical runs only
    "idle_s": ("idle (waiting or offline)", "0.85"),
}


def breakdown_colours(seconds: pd.DataFrame) -> dict:
    """BREAKDOWN_COLOURS of the columns of these round_breakdown seconds (backhaul_s: hierarchical runs)."""
    return {c: v for c, v in BREAKDOWN_COLOURS.items() if c in seconds}
# device_utilisation's parts (they sum to the run's span): legend label and colour.
UTILISATION_COLOURS = dict(zip(UTILISATION_PARTS, [
    ("compute", "tab:orange"),
    ("communication", "tab:blue"),
    ("wasted (update not used)", "tab:red"),
    ("waiting for aggregation (update uploaded)", "tab:olive"),
    ("idle (no task, or offline)", "0.85"),
]))


def plot_accuracy(runs: list[Run], x: str, path, metric: str = "accuracy") -> Path:
    """Accuracy against simulated time, cumulative uplink MB, cumulative FLOPs or cumulative joules (x: a key of
    ACCURACY_AXES; a run without the axis's column, energy, has no line); one line per run through its evaluated
    rounds, and a dashed line at each target accuracy. metric "local_accuracy" draws the mean over devices of
    their accuracy on their own test data (a run without it has no line)."""
    what, _, column, x_of, _ = accuracy_axis(x)
    title_word = accuracy_metric(metric)[0]
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, run in zip(run_labels(runs), runs):
        if column not in run.rounds:
            continue
        values = numeric(run.rounds, metric)
        evaluated = values.notna()
        ax.plot(x_of(run.rounds)[evaluated], values[evaluated], marker="o", markersize=3, label=label)
    _finish_accuracy_plot(ax, runs, x, metric, f"{title_word} vs {what}")
    return _save(fig, path)


def plot_accuracy_mean(runs: list[Run], x: str, path, metric: str = "accuracy",
                       groups: dict[str, list[Run]] | None = None) -> Path:
    """plot_accuracy with the seeds of each scenario averaged (see mean_curve): one line per scenario, and a
    band of its 95% interval (on logits: within [0, 1]), so that methods are compared beyond one seed's luck.
    metric "local_accuracy" draws the mean over devices of their accuracy on their own test data.
    groups: the runs to average, by label (default: analysis.runs.scenario_groups)."""
    what = accuracy_axis(x).what
    title_word = accuracy_metric(metric)[0]
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, group in (groups or scenario_groups(runs)).items():
        curve = mean_curve(group, x, metric)
        if curve.empty:  # a scenario without this metric (no local test split) has no line
            continue
        seeds = f"mean of {len(group)} seeds" if len(group) > 1 else "1 seed"
        plot_mean_with_band(ax, curve["x"], curve, f"{label} ({seeds})", band=("ci95_low", "ci95_high"))
    title = f"{title_word} vs {what}, mean over seeds (band: 95% interval)"
    _finish_accuracy_plot(ax, runs, x, metric, title)
    return _save(fig, path)


def plot_mean_with_band(ax, x, values: pd.DataFrame, label: str, band: tuple[str, str] = ("min", "max")):
    """A line through values["mean"] against x, and a band of its colour between the two `band` columns (default:
    from values["min"] to values["max"], the spread over seeds or over devices); no band where they are NaN (one
    seed has no interval); returns the line."""
    (line,) = ax.plot(x, values["mean"], marker="o", markersize=3, label=label)
    ax.fill_between(x, values[band[0]], values[band[1]], color=line.get_color(), alpha=0.2, linewidth=0)
    return line


def mean_curve(runs: list[Run], x: str, metric: str = "accuracy") -> pd.DataFrame:
    """The seeds of one scenario as one curve: for each round that every seed evaluated (the index), the
    mean over seeds of the x axis value at that round's end, and the mean, min and max of `metric`, and the
    95% interval of the seeds' accuracy, ci95_low and ci95_high: Student's t on logits, taken back, so that it
    stays within [0, 1] (analysis.intervals, analysis.scales.LOGIT; NaN for one seed).
    Rounds only some seeds have (others stopped at their target) are left out: a mean over the seeds
    still running would jump where one stops. Runs evaluated on simulated time (eval.every_s), whose
    evaluated rounds differ from seed to seed, are matched by evaluation instead: the k-th of each seed."""
    _, _, column, x_of, _ = accuracy_axis(x)
    runs = [run for run in runs if column in run.rounds]
    if not runs:  # no seed has this axis (energy not modelled): no curve
        return pd.DataFrame(columns=["x", "mean", "min", "max", "ci95_low", "ci95_high"])
    by_time = any((run.scenario.get("eval") or {}).get("every_s") for run in runs)
    key = "evaluation" if by_time else "round"
    points = []
    for run in runs:
        values = numeric(run.rounds, metric)
        evaluated = values.notna()
        index = range(1, int(evaluated.sum()) + 1) if by_time else run.rounds["round"][evaluated]
        points.append(pd.DataFrame({key: list(index), "x": x_of(run.rounds)[evaluated].to_numpy(),
                                    "y": values[evaluated].to_numpy()}))
    points = pd.concat(points, ignore_index=True)
    in_every_seed = points.groupby(key)["y"].transform("size") == len(runs)
    kept = points[in_every_seed]
    curve = kept.groupby(key).agg(x=("x", "mean"), mean=("y", "mean"), min=("y", "min"), max=("y", "max"))
    if len(runs) < 2:
        return curve.assign(ci95_low=np.nan, ci95_high=np.nan)
    # every point has all len(runs) seeds: one row of seeds a point, all intervals made at once
    seeds = np.stack(kept.groupby(key)["y"].apply(np.asarray).to_numpy()) if len(curve) else np.empty((0, len(runs)))
    _, low, high = mean_intervals(seeds, LOGIT)
    return curve.assign(ci95_low=low, ci95_high=high)


def accuracy_axis(x: str) -> AccuracyAxis:
    """ACCURACY_AXES[x]; a clear error otherwise."""
    if x not in ACCURACY_AXES:
        raise ValueError(f"x must be one of {sorted(ACCURACY_AXES)}, not {x!r}")
    return ACCURACY_AXES[x]


def plotted_axes(runs: list[Run]) -> list[str]:
    """The ACCURACY_AXES that some of the runs can be drawn on: energy only where a run accounts it."""
    return [x for x, axis in ACCURACY_AXES.items() if any(axis.column in run.rounds for run in runs)]


def accuracy_metric(metric: str):
    """ACCURACY_METRICS[metric]: (title word, y axis label); a clear error otherwise."""
    if metric not in ACCURACY_METRICS:
        raise ValueError(f"metric must be one of {sorted(ACCURACY_METRICS)}, not {metric!r}")
    return ACCURACY_METRICS[metric]


def _finish_accuracy_plot(ax, runs: list[Run], x: str, metric: str, title: str) -> None:
    """Axes, title and legend shared by the accuracy plots; target lines on global accuracy only, the
    one the stop rule (stop.target_accuracy) is about."""
    if metric == "accuracy":
        targets = sorted({run.target_accuracy for run in runs if run.target_accuracy is not None})
        for target in targets:
            ax.axhline(target, linestyle="--", linewidth=1, color="0.4", label=f"target {target:.0%}")
    ax.set_xlabel(ACCURACY_AXES[x].label)
    ax.set_ylabel(ACCURACY_METRICS[metric][1])
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    if ACCURACY_AXES[x].formatter:
        ax.xaxis.set_major_formatter(ACCURACY_AXES[x].formatter())
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")


def plot_gantt(run: Run, path, rounds: int = 3) -> Path:
    """Per-device timeline of the first `rounds` rounds that have events: one row per device, one bar
    per phase coloured by phase, cut phases in their outcome's style, and a line at each round end."""
    shown = sorted(run.events["round"].unique())[:rounds]
    events = run.events[run.events["round"].isin(shown)]
    devices = sorted(events["device"].unique(), key=natural_order)
    row_of = {device: row for row, device in enumerate(devices)}

    fig, ax = plt.subplots(figsize=(12, 1.8 + 0.32 * max(len(devices), 1)))
    for (device, phase, outcome), bars in events.groupby(["device", "phase", "outcome"]):
        style = CUT_STYLES.get(outcome, PHASE_STYLES.get(phase, {}))
        spans = list(zip(bars["start_s"], bars["end_s"] - bars["start_s"]))
        ax.broken_barh(spans, (row_of[device] - 0.38, 0.76), linewidth=0.6, **style)
    dropped = events[events["outcome"] == "dropped"]
    # The instant a device went offline (its dropped task's last phase ended), visible even when the cut phase
    # had barely started.
    dropped = dropped.groupby(task_ids(dropped)).agg(device=("device", "first"), end_s=("end_s", "max"))
    ax.plot(dropped["end_s"], dropped["device"].map(row_of), "x", color="darkred", markersize=7)

    # async: the window before each aggregation; hierarchical: the cloud's round, of several edge rounds
    window = ("aggregation" if run.is_async else "cloud round" if events["phase"].isin(BACKHAUL_PHASES).any()
              else "round")
    for round_number, start, end in _round_spans(run, events, shown):
        ax.axvline(end, color="black", linestyle="--", linewidth=1)
        ax.annotate(f"{window} {round_number}", ((start + end) / 2, 1), xycoords=ax.get_xaxis_transform(),
                    xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize="small")

    ax.set_yticks(range(len(devices)), [device_label(device) for device in devices], fontsize="small")
    ax.set_ylim(max(len(devices), 1) - 0.5, -0.5)  # first device on top
    if not devices:
        ax.text(0.5, 0.5, "no device events recorded", transform=ax.transAxes, ha="center", va="center")
    ax.set_xlim(left=0)
    ax.set_xlabel("Simulated time (s)")
    ax.set_ylabel("Device")
    ax.set_title(f"{run.label}: device timeline", pad=18)
    ax.grid(axis="x", alpha=0.3)
    # idle only where the run logs it (idle energy on): a legend entry for nothing would puzzle
    legend = [Patch(label=PHASE_LABELS.get(phase, phase), **style) for phase, style in PHASE_STYLES.items()
              if phase not in SHOWN_WHEN_LOGGED or (events["phase"] == phase).any()]
    legend += [Patch(label=CUT_LABELS[cut], **CUT_STYLES[cut]) for cut in (ASYNC_CUTS if run.is_async else SYNC_CUTS)]
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    return _save(fig, path)


EDGE = -2   # events.csv's device of the edge server of cell c is EDGE - c (hierarchical runs); -1 the server


def device_label(device) -> str:
    """A Gantt row's name: the device's id, or the edge server's cell."""
    return f"edge {EDGE - device}" if isinstance(device, (int, np.integer)) and device <= EDGE else str(device)


def plot_breakdown(run: Run, path) -> Path:
    """Stacked bar per round: the share of the selected devices' time spent computing, communicating,
    on work that was thrown away, and idle (see metrics.round_breakdown)."""
    seconds = round_breakdown(run.rounds, run.events)
    totals = seconds.sum(axis=1)
    shares = seconds.div(totals.where(totals > 0), axis=0).fillna(0.0)
    fig, ax = plt.subplots(figsize=(max(6, min(14, 0.3 * len(shares) + 4)), 4.5))
    bar_width = 0.8 if len(shares) <= 50 else 1.0  # no gaps once bars are thin: gaps become noise
    bottom = 0.0
    for column, (label, colour) in breakdown_colours(seconds).items():
        ax.bar(shares.index, shares[column], bottom=bottom, width=bar_width, color=colour, label=label)
        bottom = bottom + shares[column]
    ax.set_xlabel("Cloud round" if "backhaul_s" in seconds else "Round")
    if len(shares) <= 25:
        ax.set_xticks(shares.index)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("Share of selected devices' time")
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    ax.set_ylim(0, 1)
    ax.set_title(f"{run.label}: where device time went")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    return _save(fig, path)


def utilisation_by_class(run: Run) -> pd.DataFrame:
    """Per device class (devices.csv profile, in its order; the index): `devices`, how many, and the mean over
    them of each UTILISATION_PARTS share of the run's span (they sum to 1) and of `busy` (the utilisation),
    from metrics.device_utilisation; devices without tasks count as idle throughout."""
    classes = device_classes(run)
    table = device_utilisation(run.rounds, run.events, devices=classes.index)
    span = table["span_s"].where(table["span_s"] > 0)
    shares = table[list(UTILISATION_PARTS)].div(span, axis=0).fillna(0.0)
    shares["busy"] = table["utilisation"].fillna(0.0)
    of_class = classes.reindex(shares.index).fillna("unknown")
    means = shares.groupby(of_class, sort=False).mean()
    means.insert(0, "devices", of_class.value_counts().reindex(means.index))
    means.index.name = "class"
    return means


def plot_utilisation(run: Run, path) -> Path:
    """One stacked bar per device class (devices.csv profile): the mean over its devices of the share of the
    run's span spent computing, communicating, on wasted work, idle while an update waited for aggregation,
    and otherwise idle (utilisation_by_class; the parts sum to 1)."""
    means = utilisation_by_class(run)
    means.index = [f"{name} ({devices} devices, {busy:.0%} busy)"
                   for name, devices, busy in zip(means.index, means["devices"], means["busy"])]
    span = float(run.rounds["t_end_s"].iloc[-1]) if len(run.rounds) else 0.0
    return plot_stacked_shares(means, UTILISATION_COLOURS, f"Mean share of the run's {span:.4g} simulated seconds "
                               "per device", f"{run.label}: where device time went (per device class)", path)


def plot_stacked_shares(seconds: pd.DataFrame, colours: dict, xlabel: str, title: str, path) -> Path:
    """One horizontal bar per row of `seconds` (its index labels the bars, first on top): the share of the row's
    total over the columns that `colours` names (column -> legend label, colour) of each, stacked."""
    parts = seconds[list(colours)]
    shares = parts.div(parts.sum(axis=1).where(lambda total: total > 0), axis=0).fillna(0.0)
    fig, ax = plt.subplots(figsize=(9, 1.5 + 0.45 * len(shares)))
    left = np.zeros(len(shares))
    for column, (label, colour) in colours.items():
        ax.barh(shares.index, shares[column], left=left, color=colour, label=label)
        left += shares[column].to_numpy()
    ax.invert_yaxis()  # first group on top, as in the table
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    return _save(fig, path)


def staleness_by_class(run: Run) -> pd.DataFrame:
    """Staleness (the index, ascending) x device class (devices.csv profile, in its order): how many updates
    the server aggregated at that staleness (events with outcome done, one per task); every class, with zeros
    where none of its updates was aggregated; empty where the run has no staleness (a sync run)."""
    events = device_phases(run.events)
    done = events[events["outcome"] == "done"]
    if "staleness" not in done:
        return pd.DataFrame(index=pd.Index([], name="staleness", dtype="int64"))
    done = done.assign(task=task_ids(done)).drop_duplicates("task").dropna(subset=["staleness"])
    classes = device_classes(run)
    counts = pd.crosstab(done["staleness"].astype(int).to_numpy(), done["device"].map(classes).fillna("unknown")
                         .to_numpy())
    counts = counts.reindex(columns=[name for name in dict.fromkeys([*classes, "unknown"])
                                     if name in counts or name in set(classes)], fill_value=0)
    counts.index.name, counts.columns.name = "staleness", "class"
    return counts


def plot_staleness(run: Run, path) -> Path:
    """Per device class (devices.csv profile), the distribution of the staleness of the updates the server
    aggregated (staleness_by_class): grouped bars of the share of the class's updates at each staleness,
    with its count and mean in the legend. Async runs; a run without staleness shows a note instead."""
    counts = staleness_by_class(run)
    fig, ax = plt.subplots(figsize=(max(7, min(14, 0.4 * len(counts) + 4)), 4.5))
    width = 0.8 / max(1, counts.shape[1])
    for n, name in enumerate(counts.columns):
        updates = counts[name].sum()
        if not updates:  # in the legend all the same: a class whose updates were all cut or stale
            ax.bar([], [], width=width, label=f"{name}: no update aggregated")
            continue
        mean = (counts.index * counts[name]).sum() / updates
        ax.bar(counts.index + (n - (counts.shape[1] - 1) / 2) * width, counts[name] / updates, width=width,
               label=f"{name}: {updates} update{'' if updates == 1 else 's'}, mean {mean:.2f}")
    if counts.empty:
        ax.text(0.5, 0.5, "no aggregated update with a staleness (a synchronous run?)", transform=ax.transAxes,
                ha="center", va="center")
    else:
        ax.legend(fontsize="small")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("Staleness at arrival (model versions behind)")
    ax.set_ylabel("Share of the class's aggregated updates")
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    ax.set_title(f"{run.label}: staleness of aggregated updates (per device class)")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def _round_spans(run: Run, events, shown):
    """(round, start, end) of each shown round: from rounds.csv, or from its events if it has no row."""
    rows = run.rounds.set_index("round")
    for round_number in shown:
        if round_number in rows.index:
            yield round_number, rows.at[round_number, "t_start_s"], rows.at[round_number, "t_end_s"]
        else:
            own = events[events["round"] == round_number]
            yield round_number, own["start_s"].min(), own["end_s"].max()


def _save(fig, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path
