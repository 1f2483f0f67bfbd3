"""Compare runs: a time-to-accuracy table per run, the same averaged over each scenario's seeds, and a
report folder holding the tables and every plot."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from analysis.metrics import LAST_ROUNDS, cost_to_accuracy, has_local_accuracy, mean_of_last, numeric, summarize
from analysis.battery_plots import plot_battery
from analysis.link_plots import plot_links
from analysis.plots import (accuracy_metric, plot_accuracy, plot_accuracy_mean, plot_breakdown, plot_gantt,
                            plot_staleness, plot_utilisation, plotted_axes)
from analysis.runs import Run, load_run, run_labels, scenario_groups
from analysis.terminal import fit_table, wrap

DEFAULT_TARGETS = [0.5, 0.8, 0.9]
LABEL_COLUMNS = ("run", "scenario", "algorithm")
SEED_KEY = ["scenario", "algorithm"]  # as analysis.runs.scenario_groups: one algorithm per averaged row
REACHED_ON = "time_s@"  # the cost column of a target that is missing exactly where the target was not reached
SEED_NOTE = ("mean±std over each scenario's seeds (sample std);\ntime_s/uplink_MB/rounds@target: "
             "over only the seeds that reached it, reached@target of them")   # two lines within 100 columns
DEFAULT_METRIC = "accuracy"
# Printed above the tables when the targets are not on the global accuracy, the default.
METRIC_NOTES = {"local_accuracy": "targets on local_accuracy (mean over devices of each one's accuracy on its own "
                                  "test data): time_s/uplink_MB/rounds@target count up to the first round reaching it"}
# Runs that model resources (summary.json key -> table column; runs without them get none of these columns): joules
# of every device phase, wasted (of updates not used), online devices kept out by memory or battery (device-rounds),
# and tasks dropped by an empty battery.
RESOURCE_COLUMNS = {"energy_J_total": "total_energy_J", "wasted_energy_J_total": "wasted_energy_J",
                    "excluded_memory_total": "excluded_memory", "excluded_battery_total": "excluded_battery",
                    "depleted_total": "depleted"}
ENERGY_TO = "energy_J@"  # joules up to the round that first reached the target, beside its time_s@
ENERGY_COLUMNS = ("total_energy_J", "wasted_energy_J", ENERGY_TO)  # (prefixes) shown in J, kJ or MJ
COUNT_COLUMNS = ("rounds", "excluded_memory", "excluded_battery", "depleted")  # (prefixes) whole numbers
JOULE_UNITS = ((1e6, "MJ"), (1e3, "kJ"))
RESOURCE_NOTE = ("energy: joules of all devices' phases (idle waits too where counted), wasted: of updates not "
                 "used; energy_J@target: up to the first round reaching it (seed means: as time_s@target); "
                 "excluded_memory/excluded_battery: online devices kept out, summed over rounds; depleted: tasks "
                 "dropped by an empty battery")


class MissingMetric(ValueError):
    """A run has no values of the metric the targets are on (no local test split for local_accuracy)."""


def require_metric(runs: list[Run], metric: str) -> None:
    """Raise unless metric is one the report knows and, beyond the default, every run has some values of it:
    a run without them would silently read as never reaching any target."""
    accuracy_metric(metric)
    if metric == DEFAULT_METRIC:
        return  # a run not evaluated yet simply reaches no target, as always
    for run in runs:
        if not numeric(run.rounds, metric).notna().any():
            raise MissingMetric(f"{run.path}: no {metric} values in rounds.csv: devices are scored on their own "
                                "test data only where the scenario sets data.client_split.test_fraction > 0")


def tta_table(runs: list[Run], targets: list[float], metric: str = DEFAULT_METRIC) -> pd.DataFrame:
    """One row per run: headline numbers, and for each target the simulated seconds, uplink MB and rounds it took
    `metric` ("accuracy" or "local_accuracy", see metrics.first_reaching) to reach it (missing where it was never
    reached), and TFLOPs spent by then. Computed from rounds.csv, so any target can be asked for, not only those in
    summary.json. total_TFLOPs counts every FLOP spent, the wasted ones (dropped, late and surplus updates) included;
    last3_* are the mean over the last three evaluated rounds, as the FedLPS paper reports. Where some run models
    resources, the RESOURCE_COLUMNS it has (total and wasted joules, devices kept out by memory or battery, tasks an
    empty battery dropped) and, with energy, energy_J@t: the joules spent up to the round reaching t. Raises
    MissingMetric where a run has no values of a metric other than accuracy."""
    require_metric(runs, metric)
    summaries = [summarize(run.rounds) for run in runs]
    # every run gets the resource columns that some run has (None where it has not), in one order
    resources = {key: column for key, column in RESOURCE_COLUMNS.items() if any(key in s for s in summaries)}
    rows = []
    for label, run, summary in zip(run_labels(runs), runs, summaries):
        row = {
            "run": label,
            "scenario": run.name,
            "algorithm": run.algorithm,
            "rounds": summary["rounds"],
            "sim_time_s": summary["sim_time_s"],
            "total_TFLOPs": summary["flops_total"] / 1e12,
            "total_uplink_MB": summary["bytes_up_total"] / 1e6,
            **{column: summary.get(key) for key, column in resources.items()},
            "final_accuracy": summary["final_accuracy"],
            "best_accuracy": summary["best_accuracy"],
            f"last{LAST_ROUNDS}_accuracy": mean_of_last(run.rounds, "accuracy"),
        }
        if has_local_accuracy(run.rounds):
            # personalized evaluation: the mean over devices of their accuracy on their own test data
            row["final_local_accuracy"] = run.rounds["local_accuracy"].dropna().iloc[-1]
            row[f"last{LAST_ROUNDS}_local_accuracy"] = mean_of_last(run.rounds, "local_accuracy")
        for target in targets:
            cost = cost_to_accuracy(run.rounds, target, metric)
            reached = cost["time_s"] is not None
            row[f"{REACHED_ON}{target:g}"] = cost["time_s"]
            if "energy_J_total" in resources:
                row[f"{ENERGY_TO}{target:g}"] = cost.get("energy_J")
            row[f"uplink_MB@{target:g}"] = cost["bytes_up"] / 1e6 if reached else None
            row[f"TFLOPs@{target:g}"] = cost["flops"] / 1e12 if reached else None
            row[f"rounds@{target:g}"] = cost["rounds"]
        rows.append(row)
    table = pd.DataFrame(rows)
    # Explicit dtypes: a column whose every value is None would otherwise be `object`.
    for column in table.columns.drop(list(LABEL_COLUMNS)):
        table[column] = table[column].astype("Int64" if column.startswith(COUNT_COLUMNS) else "float64")
    return table


def seed_table(table_or_runs: pd.DataFrame | list[Run], targets: list[float] | None = None,
               metric: str = DEFAULT_METRIC, key: list[str] = SEED_KEY) -> pd.DataFrame:
    """One row per scenario (per scenario and algorithm, should one name have several; per value of the `key` columns),
    in the order first seen: the key columns, `seeds`, how many runs it has, and for each numeric column of tta_table
    its mean over the seeds, `<col>`, and sample standard deviation, `<col>_std` (ddof=1, NaN for one seed). The cost of
    a target (time_s@t, uplink_MB@t, rounds@t) is averaged over only the seeds that reached it, so `reached@t` ("k/n")
    comes with it. Takes tta_table's table, or the runs (and targets, default_targets if None, and the metric the
    targets are on)."""
    table = table_or_runs
    if not isinstance(table, pd.DataFrame):
        table = tta_table(table, default_targets(table) if targets is None else targets, metric)
    measured = [column for column in table.columns if column not in (*LABEL_COLUMNS, *key)
                and pd.api.types.is_numeric_dtype(table[column])]
    rows = []
    for values, seeds in table.groupby(key, sort=False, dropna=False):
        row = {**dict(zip(key, values)), "seeds": len(seeds)}
        for column in measured:
            if column.startswith(REACHED_ON):
                row[f"reached@{column.removeprefix(REACHED_ON)}"] = f"{seeds[column].notna().sum()}/{len(seeds)}"
            values = seeds[column].astype("float64")
            row[column] = values.mean()
            row[f"{column}_std"] = values.std(ddof=1)
        rows.append(row)
    return pd.DataFrame(rows)


def seed_table_of_groups(table: pd.DataFrame, runs: list[Run], groups: dict[str, list[Run]]) -> pd.DataFrame:
    """seed_table of tta_table's table of the runs, with a `group` column (the groups' labels) beside scenario
    and algorithm where some scenario's runs fall in several groups: runs of one name that differ in more than
    the seed (another --set) are not one scenario's seeds."""
    label = {id(run): name for name, members in groups.items() for run in members}
    keyed = table.assign(group=[label[id(run)] for run in runs])
    split = bool(keyed.groupby(SEED_KEY, sort=False)["group"].nunique().gt(1).any())
    return seed_table(keyed, key=[*SEED_KEY, "group"] if split else SEED_KEY)


def format_table(table: pd.DataFrame) -> str:
    """The table as aligned plain text: '-' where a value is missing (a target never reached)."""
    return table_cells(table).to_string(index=False)


def table_cells(table: pd.DataFrame) -> pd.DataFrame:
    """The table's values as the text format_table shows: joules with their unit, J, kJ or MJ."""
    return table.apply(lambda values: values.map(_joules_cell if values.name.startswith(ENERGY_COLUMNS) else _cell))


def resource_note(table: pd.DataFrame) -> str:
    """RESOURCE_NOTE where the table has resource columns, else nothing."""
    return RESOURCE_NOTE if any(column in table for column in RESOURCE_COLUMNS.values()) else ""


def format_seed_table(table: pd.DataFrame) -> str:
    """seed_table as format_table writes tables, with each `<col>` and `<col>_std` in one cell:
    "0.962±0.004", the mean alone where there is no std (one seed, or one seed reached the target)."""
    return seed_table_cells(table).to_string(index=False)


def seed_table_cells(table: pd.DataFrame) -> pd.DataFrame:
    """The columns and text of format_seed_table: `<col>_std` folded into `<col>`."""
    cells = {}
    for column in table.columns:
        if column.endswith("_std") and column.removesuffix("_std") in table:
            continue
        if f"{column}_std" in table:
            cells[column] = [_mean_std_cell(column, mean, std)
                             for mean, std in zip(table[column], table[f"{column}_std"])]
        else:
            cells[column] = table[column].map(_cell)
    return pd.DataFrame(cells)


def default_targets(runs: list[Run]) -> list[float]:
    """The runs' own stop.target_accuracy values, or DEFAULT_TARGETS when none of them sets one."""
    targets = sorted({run.target_accuracy for run in runs if run.target_accuracy is not None})
    return targets or list(DEFAULT_TARGETS)


def write_report(run_dirs: list, out_dir, targets: list[float] | None = None, metric: str = DEFAULT_METRIC,
                 groups=scenario_groups) -> tuple[str, list[Path]]:
    """Load the runs (run folders, or Runs already read) and write into out_dir: `metric` vs time / uplink bytes /
    FLOPs (and energy where a run accounts it), a Gantt and a breakdown plot per run (async runs: a utilisation and
    a staleness plot instead of the breakdown; runs with batteries: their levels too), and tta.csv; where some group
    of `groups(runs)` (label -> runs; default: by scenario) has several runs, also the metric (and local accuracy)
    averaged over each group's seeds, and where some scenario has several seeds in one group tta_by_scenario.csv
    (seed_table_of_groups). The targets are on `metric`; a metric other than accuracy puts its name in the file
    names (local_accuracy_vs_time.png, tta_local_accuracy.csv), so that they sit beside the default report, and the
    text starts with a line naming it (resource runs: one naming their columns). Returns the tables as text (the
    seed table after the per-run one) and the paths written."""
    runs = [run if isinstance(run, Run) else load_run(run) for run in run_dirs]
    if not runs:
        raise ValueError("write_report needs at least one run folder")
    targets = default_targets(runs) if targets is None else targets
    table = tta_table(runs, targets, metric)  # before anything is written: a run may lack the metric
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    averaged = groups(runs)
    by_scenario = seed_table_of_groups(table, runs, averaged)
    several_seeds = bool((by_scenario["seeds"] > 1).any())
    suffix = "" if metric == DEFAULT_METRIC else f"_{metric}"

    axes = plotted_axes(runs)  # accuracy vs energy too where a run accounts energy
    written = [plot_accuracy(runs, x, out_dir / f"{metric}_vs_{x}.png", metric) for x in axes]
    if any(len(members) > 1 for members in averaged.values()):  # else each mean is a run's curve drawn again
        written += [plot_accuracy_mean(runs, x, out_dir / f"{metric}_mean_vs_{x}.png", metric, averaged)
                    for x in axes]
        if metric == DEFAULT_METRIC and any(has_local_accuracy(run.rounds) for run in runs):
            written.append(plot_accuracy_mean(runs, "time", out_dir / "local_accuracy_mean_vs_time.png",
                                              "local_accuracy", averaged))
    for label, run in zip(run_labels(runs), runs):
        name = file_safe(label)
        written.append(plot_gantt(run, out_dir / f"gantt_{name}.png"))
        if run.is_async:  # its rows are aggregation windows, which tasks span: per device class instead
            written.append(plot_utilisation(run, out_dir / f"utilisation_{name}.png"))
            written.append(plot_staleness(run, out_dir / f"staleness_{name}.png"))
        else:
            written.append(plot_breakdown(run, out_dir / f"breakdown_{name}.png"))
        if run.battery is not None:
            written.append(plot_battery(run, out_dir / f"battery_{name}.png"))
        if run.links is not None:
            written.append(plot_links(run, out_dir / f"links_{name}.png"))
    table.to_csv(out_dir / f"tta{suffix}.csv", index=False)
    written.append(out_dir / f"tta{suffix}.csv")
    if several_seeds:
        by_scenario.to_csv(out_dir / f"tta_by_scenario{suffix}.csv", index=False)
        written.append(out_dir / f"tta_by_scenario{suffix}.csv")
    return printed_tables(table, by_scenario if several_seeds else None, metric), written


def printed_tables(table: pd.DataFrame, by_scenario: pd.DataFrame | None, metric: str = DEFAULT_METRIC) -> str:
    """What `testbed run` and `report` print of tta_table's table (and seed_table's, where given): its notes wrapped
    and its columns in blocks that fit a terminal (analysis.terminal), each block led by the columns naming a row;
    the csv files hold the tables whole."""
    notes = wrap("\n".join(filter(None, [METRIC_NOTES.get(metric), resource_note(table)])))
    text = "\n".join(filter(None, [notes, fit_table(table_cells(table), ["run"])]))
    if by_scenario is not None:
        keys = [column for column in (*SEED_KEY, "group") if column in by_scenario]
        text += f"\n\n{wrap(SEED_NOTE)}\n{fit_table(seed_table_cells(by_scenario), keys)}"
    return text


def file_safe(label: str) -> str:
    """A run label as a file name part: "mnist/fedavg/0" -> "mnist_fedavg_0"."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_")


def _cell(value) -> str:
    if pd.isna(value):
        return "-"
    if isinstance(value, float):
        return f"{value:.{_decimals(value)}f}"
    return str(value)


def _mean_std_cell(column: str, mean, std) -> str:
    if column.startswith(ENERGY_COLUMNS):
        return _joules_cell(mean, std)
    if pd.isna(mean):
        return "-"
    # A mean of counts (rounds, devices kept out) is read as a count: one decimal, as for seconds and megabytes.
    decimals = 1 if column.startswith(COUNT_COLUMNS) else _decimals(mean)
    return _mean_std_text(mean, std, decimals)


def _joules_cell(value, std=float("nan")) -> str:
    """Joules in the unit that keeps the number short, "51.3 J", "12.3 kJ", "1.500 MJ", with ±std in that unit."""
    if pd.isna(value):
        return "-"
    scale, unit = next(((scale, unit) for scale, unit in JOULE_UNITS if abs(value) >= scale), (1.0, "J"))
    return f"{_mean_std_text(value / scale, std / scale, _decimals(value / scale))} {unit}"


def _mean_std_text(mean: float, std: float, decimals: int) -> str:
    return f"{mean:.{decimals}f}" if pd.isna(std) else f"{mean:.{decimals}f}±{std:.{decimals}f}"


def _decimals(value: float) -> int:
    """Accuracies and small amounts keep three decimals; seconds and megabytes need only one."""
    return 3 if abs(value) < 10 else 1
