"""Compare groups of runs. Runs whose resolved scenarios differ only in seed (and name) are one group; a group's
row holds the mean and spread over its seeds of the time, uplink bytes and FLOPs to each target accuracy, and
the speedup against a baseline under the same conditions (the ratio of the geometric mean times, as intervals.csv
has it with its interval)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.compare_plots import write_compare_plots
from analysis.discovery import runs_of
from analysis.report import DEFAULT_METRIC, LABEL_COLUMNS, default_targets, seed_table, tta_table
from analysis.runs import Run
from analysis.verdicts import SPEEDUP, agreement_table, interval_table

NOT_CONDITIONS = ("seed", "name", "description")  # they label a run, they do not make it another experiment
# How a run was carried out, not what ran: executors give the same tables (README, Executors)
HOW_IT_RAN = ("executor.", "checkpoint.", "device_state.")
ALGORITHM = "algorithm.name"
ALGORITHM_SECTION = "algorithm."
MAX_LABEL_FIELDS = 3  # beyond this many differing fields, groups are labelled by scenario name
MAX_LABEL_CHARS = 60  # ... and where a label would be longer (a list such as fleet.groups differs): file names


DEFAULT_SELECTION = {"name": "uniform", "options": {}}   # what a resolved scenario without `selection` ran


class UnknownBaseline(ValueError):
    """--baseline names neither a group nor an algorithm of the runs."""


class MissingBaseline(ValueError):
    """--against without --baseline (the verdicts it checks are against one), or with none of the runs here."""


def config(run: Run) -> dict[str, str]:
    """The run's resolved scenario as flat 'a.b.c' -> JSON text, without what does not define the experiment
    (its labels, and how it ran: executor, checkpoints, where device state is kept)."""
    scenario = ({"selection": DEFAULT_SELECTION} | run.scenario) if run.scenario else {}  # left out when default
    flat = pd.json_normalize(scenario, sep=".").iloc[0].to_dict() if scenario else {}
    return {key: json.dumps(value, sort_keys=True, default=str) for key, value in flat.items()
            if key not in NOT_CONDITIONS and not key.startswith(HOW_IT_RAN)}


def differing(configs: list[dict]) -> list[str]:
    """The fields whose values are not the same in every config, in the first config's order. An algorithm's
    hyper-parameter (algorithm.mu) counts only where it differs between configs of one algorithm: FedLPS's
    defaults are not a difference of their own beside FedAvg."""
    keys = list(dict.fromkeys(key for c in configs for key in c))

    def differs(key, among):
        return len({c.get(key) for c in among}) > 1

    def of_one_algorithm():
        names = {c.get(ALGORITHM) for c in configs}
        return [[c for c in configs if c.get(ALGORITHM) == name] for name in names]

    return [key for key in keys
            if (differs(key, configs) if key == ALGORITHM or not key.startswith(ALGORITHM_SECTION)
                else any(differs(key, same) for same in of_one_algorithm()))]


def group_runs(runs: list[Run]) -> tuple[dict[str, list[Run]], pd.DataFrame]:
    """The runs by group, in the order first seen, keyed by a label made of the fields that tell the groups apart
    ('fedavg, heterogeneity=high'); and a table of those fields' values, one row per group (index: label).
    Where more than MAX_LABEL_FIELDS fields differ, or a label would be longer than MAX_LABEL_CHARS, the scenario
    names label the groups."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(json.dumps(config(run), sort_keys=True), []).append(run)
    configs = [json.loads(key) for key in groups]
    fields = differing(configs)
    values = pd.DataFrame([{_column(f): _value(c.get(f)) for f in fields} for c in configs])
    labels = _unique([", ".join(str(v) if f == ALGORITHM else f"{_short(f)}={v}"
                                for f, v in zip(fields, row) if pd.notna(v))  # no mu=None beside fedavg
                      for row in values.itertuples(index=False)])
    if not fields or len(fields) > MAX_LABEL_FIELDS or max(map(len, labels)) > MAX_LABEL_CHARS:
        labels = _unique([members[0].name for members in groups.values()])
        return dict(zip(labels, groups.values())), pd.DataFrame(index=pd.Index(labels, name="group"))
    values.index = pd.Index(labels, name="group")
    return dict(zip(labels, groups.values())), values


def _short(field: str) -> str:
    """A field as a label names it: its last part ('heterogeneity'), the section for selection.name."""
    return "selection" if field == "selection.name" else field.rsplit(".", 1)[-1]


def compare_table(runs: list[Run], targets: list[float], baseline: str | None = None,
                  metric: str = DEFAULT_METRIC) -> pd.DataFrame:
    """One row per group: the fields that tell groups apart, `seeds`, and seed_table's mean `<col>` and sample
    std `<col>_std` of every tta_table column (time_s@t, uplink_MB@t, TFLOPs@t and rounds@t over the seeds
    that reached t, with reached@t). With a baseline (a group label, or an algorithm name: then each group is
    set against that algorithm's group with the same other fields, or against its only group),
    speedup@t = the baseline's time_s@t over the group's, the ratio of their geometric means over the seeds that
    reached t (analysis.verdicts: intervals.csv's speedup@t, whose interval comes from the same model)."""
    return compare_all(runs, targets, baseline, metric).table


@dataclass
class Comparison:
    """compare's tables: `table` (compare.csv, compare_table), `intervals` (intervals.csv, analysis.verdicts
    .interval_table) and, against a second set of the runs, `agreement` (sensitivity.csv, agreement_table)."""

    table: pd.DataFrame
    intervals: pd.DataFrame
    agreement: pd.DataFrame | None = None


def compare_all(runs: list[Run], targets: list[float], baseline: str | None = None, metric: str = DEFAULT_METRIC,
                against: list[Run] | None = None) -> Comparison:
    """compare_table, the intervals of its groups and, with `against` (the same runs in another summation order),
    whether each verdict holds there: against's runs are grouped by the same configurations (executor settings
    aside) and set against the same baselines; a group it lacks is "missing"."""
    if against is not None and baseline is None:
        raise MissingBaseline("--against checks verdicts against a baseline: give --baseline too")
    groups, fields = group_runs(runs)
    per_run, metrics = _per_run(groups, fields, targets, metric)
    key = ["group", *fields.columns.drop("algorithm", errors="ignore")]
    table = seed_table(per_run, key=key)
    table.insert(1, "algorithm", [groups[label][0].algorithm for label in table["group"]])
    baselines = None if baseline is None else dict(zip(table["group"], _baselines(table, fields, baseline)))
    intervals = interval_table(per_run, metrics, baselines)
    if baselines is not None:  # the speedups of intervals.csv, so that one number answers one question
        speedups = intervals[intervals["metric"].str.startswith(SPEEDUP)].pivot(index="group", columns="metric",
                                                                                 values="mean")
        for column in speedups.columns:
            table[column] = table["group"].map(speedups[column]).astype("float64")
    if against is None:
        return Comparison(table, intervals)
    other_groups = _as_labelled(groups, against)
    if not other_groups:
        raise MissingBaseline("--against: none of its runs has the configuration of a group here (executor "
                              "settings aside): give the same runs made in another summation order")
    other, _ = _per_run(other_groups, fields, targets, metric)
    return Comparison(table, intervals, agreement_table(intervals, interval_table(other, metrics, baselines)))


def _per_run(groups: dict[str, list[Run]], fields: pd.DataFrame, targets: list[float],
             metric: str) -> tuple[pd.DataFrame, list[str]]:
    """tta_table of the groups' runs with their `group` and the fields that tell groups apart; and the names of
    tta_table's measured columns."""
    per_run = tta_table([run for members in groups.values() for run in members], targets, metric)
    metrics = [c for c in per_run.columns if c not in LABEL_COLUMNS]
    per_run.insert(0, "group", [label for label, members in groups.items() for _ in members])
    for column in fields.columns.drop("algorithm", errors="ignore"):
        per_run[column] = per_run["group"].map(fields[column])
    return per_run, metrics


def _as_labelled(groups: dict[str, list[Run]], runs: list[Run]) -> dict[str, list[Run]]:
    """runs grouped as `groups` were, under those groups' labels: by configuration, executor settings aside
    (config); runs of a configuration that `groups` lacks are left out, and a label none of them has is too."""
    label_of = {_key(members[0]): label for label, members in groups.items()}
    other: dict[str, list[Run]] = {}
    for run in runs:
        if _key(run) in label_of:
            other.setdefault(label_of[_key(run)], []).append(run)
    return other


def _key(run: Run) -> str:
    return json.dumps(config(run), sort_keys=True)


def _baselines(table: pd.DataFrame, fields: pd.DataFrame, baseline: str) -> list:
    """For each group of the table, the label of the group it is set against (NaN where there is none)."""
    if baseline in set(table["group"]):
        return [baseline] * len(table)
    candidates = table[table["algorithm"] == baseline]
    if candidates.empty:
        raise UnknownBaseline(f"--baseline {baseline}: no group or algorithm of that name among the runs; choose "
                              f"one of: {', '.join(map(repr, dict.fromkeys([*table['algorithm'], *table['group']])))}")
    if len(candidates) == 1:
        return [candidates["group"].iloc[0]] * len(table)
    conditions = fields[[c for c in fields.columns if c != "algorithm" and not c.startswith(ALGORITHM_SECTION)]]
    same = {tuple(map(str, conditions.loc[label])): label for label in candidates["group"]}
    return [same.get(tuple(map(str, conditions.loc[label])), np.nan) for label in table["group"]]


def write_compare(run_dirs: list, out_dir, targets: list[float] | None = None, baseline: str | None = None,
                  metric: str = DEFAULT_METRIC, timelines: bool = True,
                  curves: bool = True) -> tuple[pd.DataFrame, list[Path]]:
    """write_comparison, returning compare_table's table and the paths written."""
    comparison, written = write_comparison(run_dirs, out_dir, targets, baseline, metric, timelines, curves)
    return comparison.table, written


def write_comparison(run_dirs: list, out_dir, targets: list[float] | None = None, baseline: str | None = None,
                     metric: str = DEFAULT_METRIC, timelines: bool = True, curves: bool = True,
                     against: list | None = None) -> tuple[Comparison, list[Path]]:
    """compare_all of the runs (folders, folders that hold runs, or Runs already read; `against` likewise) into
    out_dir: compare.csv, intervals.csv, with `against` sensitivity.csv, and the comparison plots (see
    analysis.compare_plots; timelines: a Gantt of each group's first run too; curves: the groups' accuracy
    curves); returns the tables and the paths written."""
    runs = runs_of(run_dirs)
    targets = default_targets(runs) if targets is None else targets
    # before anything is written: a bad baseline or metric
    comparison = compare_all(runs, targets, baseline, metric, None if against is None else runs_of(against))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = {"compare.csv": comparison.table, "intervals.csv": comparison.intervals,
              "sensitivity.csv": comparison.agreement}
    for name, table in tables.items():
        if table is not None:
            table.to_csv(out_dir / name, index=False)
    groups, _ = group_runs(runs)
    plots = write_compare_plots(groups, comparison.table, targets, out_dir, metric, timelines, curves)
    return comparison, [out_dir / name for name, table in tables.items() if table is not None] + plots


def _column(field: str) -> str:
    return "algorithm" if field == ALGORITHM else field


def _value(text: str | None):
    """A field's value for the table: a number or text as such, a list or section as its JSON text."""
    value = None if text is None else json.loads(text)
    return text if isinstance(value, (list, dict)) else value


def _unique(labels: list[str]) -> list[str]:
    """Labels made distinct by a '#2', '#3' where two are the same."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return out
