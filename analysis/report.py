"""Compare runs: a time-to-accuracy table, and a report folder holding the table and every plot."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from analysis.metrics import cost_to_accuracy, summarize
from analysis.plots import ACCURACY_AXES, plot_accuracy, plot_breakdown, plot_gantt
from analysis.runs import Run, load_run, run_labels

DEFAULT_TARGETS = [0.5, 0.8, 0.9]


def tta_table(runs: list[Run], targets: list[float]) -> pd.DataFrame:
    """One row per run: headline numbers, and for each target the simulated seconds, uplink MB and
    rounds it took to reach it (missing where it was never reached). Computed from rounds.csv, so any
    target can be asked for, not only those in summary.json."""
    rows = []
    for label, run in zip(run_labels(runs), runs):
        summary = summarize(run.rounds)
        row = {
            "run": label,
            "algorithm": run.algorithm,
            "rounds": summary["rounds"],
            "sim_time_s": summary["sim_time_s"],
            "final_accuracy": summary["final_accuracy"],
            "best_accuracy": summary["best_accuracy"],
        }
        if "local_accuracy" in run.rounds and run.rounds["local_accuracy"].notna().any():
            # personalized evaluation: the mean over devices of their accuracy on their own test data
            row["final_local_accuracy"] = run.rounds["local_accuracy"].dropna().iloc[-1]
        for target in targets:
            cost = cost_to_accuracy(run.rounds, target)
            reached = cost["time_s"] is not None
            row[f"time_s@{target:g}"] = cost["time_s"]
            row[f"uplink_MB@{target:g}"] = cost["bytes_up"] / 1e6 if reached else None
            row[f"rounds@{target:g}"] = cost["rounds"]
        rows.append(row)
    table = pd.DataFrame(rows)
    # Explicit dtypes: a column whose every value is None would otherwise be `object`.
    for column in table.columns[2:]:
        table[column] = table[column].astype("Int64" if column.startswith("rounds") else "float64")
    return table


def format_table(table: pd.DataFrame) -> str:
    """The table as aligned plain text: '-' where a value is missing (a target never reached)."""
    return table.map(_cell).to_string(index=False)


def default_targets(runs: list[Run]) -> list[float]:
    """The runs' own stop.target_accuracy values, or DEFAULT_TARGETS when none of them sets one."""
    targets = sorted({run.target_accuracy for run in runs if run.target_accuracy is not None})
    return targets or list(DEFAULT_TARGETS)


def write_report(run_dirs: list, out_dir, targets: list[float] | None = None) -> tuple[str, list[Path]]:
    """Load the runs and write into out_dir: accuracy vs time / uplink bytes / FLOPs, a Gantt and a
    breakdown plot per run, and tta.csv. Returns the table as text and the paths written."""
    runs = [load_run(run_dir) for run_dir in run_dirs]
    if not runs:
        raise ValueError("write_report needs at least one run folder")
    targets = default_targets(runs) if targets is None else targets
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    written = [plot_accuracy(runs, x, out_dir / f"accuracy_vs_{x}.png") for x in ACCURACY_AXES]
    for label, run in zip(run_labels(runs), runs):
        name = file_safe(label)
        written.append(plot_gantt(run, out_dir / f"gantt_{name}.png"))
        written.append(plot_breakdown(run, out_dir / f"breakdown_{name}.png"))
    table = tta_table(runs, targets)
    table.to_csv(out_dir / "tta.csv", index=False)
    written.append(out_dir / "tta.csv")
    return format_table(table), written


def file_safe(label: str) -> str:
    """A run label as a file name part: "mnist/fedavg/0" -> "mnist_fedavg_0"."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_")


def _cell(value) -> str:
    if pd.isna(value):
        return "-"
    if isinstance(value, float):
        # Accuracies and small amounts keep three decimals; seconds and megabytes need only one.
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)
