"""The run plots: accuracy against cost, a per-device timeline, and where device time went.
Each function writes one PNG and returns its path."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a window: runs on headless machines and in CI

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import EngFormatter, MaxNLocator, PercentFormatter  # noqa: E402

from analysis.metrics import accuracy_of, natural_order, round_breakdown  # noqa: E402
from analysis.runs import Run, run_labels  # noqa: E402

DPI = 120

# x-axis choices of plot_accuracy: what it is, its axis label, and its value at the end of every round.
ACCURACY_AXES = {
    "time": ("simulated time", "Simulated time (s)", lambda rounds: rounds["t_end_s"]),
    "bytes_up": ("uplink bytes", "Cumulative uplink (MB)", lambda rounds: rounds["bytes_up"].cumsum() / 1e6),
    "flops": ("training FLOPs", "Cumulative training FLOPs", lambda rounds: rounds["flops"].cumsum()),
}

PHASE_STYLES = {
    "download": {"facecolor": "tab:blue"},
    "compute": {"facecolor": "tab:orange"},
    "upload": {"facecolor": "tab:green"},
}
# A cut phase is drawn in its outcome's style, whatever the phase: the cut is what the reader looks for.
CUT_STYLES = {
    "dropped": {"facecolor": "tab:red", "edgecolor": "darkred", "hatch": "///"},
    "late": {"facecolor": "0.45", "edgecolor": "0.25", "hatch": ".."},
    "surplus": {"facecolor": "0.75", "edgecolor": "0.5"},
}
CUT_LABELS = {"dropped": "dropped (went offline)", "late": "late (deadline)", "surplus": "surplus (over-commit)"}

BREAKDOWN_COLOURS = {
    "compute_s": ("compute", "tab:orange"),
    "communication_s": ("communication", "tab:blue"),
    "wasted_s": ("wasted (dropped / late / surplus)", "tab:red"),
    "idle_s": ("idle (waiting or offline)", "0.85"),
}


def plot_accuracy(runs: list[Run], x: str, path) -> Path:
    """Accuracy against simulated time, cumulative uplink MB or cumulative FLOPs; one line per run
    through its evaluated rounds, and a dashed line at each target accuracy."""
    if x not in ACCURACY_AXES:
        raise ValueError(f"x must be one of {sorted(ACCURACY_AXES)}, not {x!r}")
    what, x_label, x_of = ACCURACY_AXES[x]
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, run in zip(run_labels(runs), runs):
        accuracy = accuracy_of(run.rounds)
        evaluated = accuracy.notna()
        ax.plot(x_of(run.rounds)[evaluated], accuracy[evaluated], marker="o", markersize=3, label=label)
    targets = sorted({run.target_accuracy for run in runs if run.target_accuracy is not None})
    for target in targets:
        ax.axhline(target, linestyle="--", linewidth=1, color="0.4", label=f"target {target:.0%}")
    ax.set_xlabel(x_label)
    ax.set_ylabel("Test accuracy")
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    if x == "flops":
        ax.xaxis.set_major_formatter(EngFormatter())  # "20 T" rather than an offset "1e13"
    ax.set_title(f"Accuracy vs {what}")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    return _save(fig, path)


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
    # The instant a device went offline, visible even when the cut phase had barely started.
    ax.plot(dropped["end_s"], dropped["device"].map(row_of), "x", color="darkred", markersize=7)

    for round_number, start, end in _round_spans(run, events, shown):
        ax.axvline(end, color="black", linestyle="--", linewidth=1)
        ax.annotate(f"round {round_number}", ((start + end) / 2, 1), xycoords=ax.get_xaxis_transform(),
                    xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize="small")

    ax.set_yticks(range(len(devices)), [str(device) for device in devices], fontsize="small")
    ax.set_ylim(max(len(devices), 1) - 0.5, -0.5)  # first device on top
    if not devices:
        ax.text(0.5, 0.5, "no device events recorded", transform=ax.transAxes, ha="center", va="center")
    ax.set_xlim(left=0)
    ax.set_xlabel("Simulated time (s)")
    ax.set_ylabel("Device")
    ax.set_title(f"{run.label}: device timeline", pad=18)
    ax.grid(axis="x", alpha=0.3)
    legend = [Patch(label=phase, **style) for phase, style in PHASE_STYLES.items()]
    legend += [Patch(label=CUT_LABELS[outcome], **style) for outcome, style in CUT_STYLES.items()]
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    return _save(fig, path)


def plot_breakdown(run: Run, path) -> Path:
    """Stacked bar per round: the share of the selected devices' time spent computing, communicating,
    on work that was thrown away, and idle (see metrics.round_breakdown)."""
    seconds = round_breakdown(run.rounds, run.events)
    totals = seconds.sum(axis=1)
    shares = seconds.div(totals.where(totals > 0), axis=0).fillna(0.0)
    fig, ax = plt.subplots(figsize=(max(6, min(14, 0.3 * len(shares) + 4)), 4.5))
    bar_width = 0.8 if len(shares) <= 50 else 1.0  # no gaps once bars are thin: gaps become noise
    bottom = 0.0
    for column, (label, colour) in BREAKDOWN_COLOURS.items():
        ax.bar(shares.index, shares[column], bottom=bottom, width=bar_width, color=colour, label=label)
        bottom = bottom + shares[column]
    ax.set_xlabel("Round")
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
