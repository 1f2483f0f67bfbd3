"""Compare groups of runs. Runs whose resolved scenarios differ only in seed (and name) are one group; a group's
row holds the mean and spread over its seeds of the time, uplink bytes and FLOPs to each target accuracy, and
the speedup against a baseline under the same conditions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.compare_plots import write_compare_plots
from analysis.discovery import runs_of
from analysis.report import DEFAULT_METRIC, REACHED_ON, default_targets, seed_table, tta_table
from analysis.runs import Run

NOT_CONDITIONS = ("seed", "name", "description")  # they label a run, they do not make it another experiment
# How a run was carried out, not what ran: executors give the same tables (README, Executors)
HOW_IT_RAN = ("executor.", "checkpoint.", "device_state.")
ALGORITHM = "algorithm.name"
ALGORITHM_SECTION = "algorithm."
MAX_LABEL_FIELDS = 3  # beyond this many differing fields, groups are labelled by scenario name
MAX_LABEL_CHARS = 60  # ... and where a label would be longer (a list such as fleet.groups differs): file names
SPEEDUP = "speedup@"


DEFAULT_SELECTION = {"name": "uniform", "options": {}}   # what a resolved scenario without `selection` ran


class UnknownBaseline(ValueError):
    """--baseline names neither a group nor an algorithm of the runs."""


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
    speedup@t = the baseline's mean time_s@t / the group's."""
    groups, fields = group_runs(runs)
    per_run = tta_table([run for members in groups.values() for run in members], targets, metric)
    per_run.insert(0, "group", [label for label, members in groups.items() for _ in members])
    key = ["group", *fields.columns.drop("algorithm", errors="ignore")]
    for column in key[1:]:
        per_run[column] = per_run["group"].map(fields[column])
    table = seed_table(per_run, key=key)
    table.insert(1, "algorithm", [groups[label][0].algorithm for label in table["group"]])
    if baseline is not None:
        against = _baselines(table, fields, baseline)
        for column in [c for c in table.columns if c.startswith(REACHED_ON) and not c.endswith("_std")]:
            base = table.set_index("group")[column].reindex(against).to_numpy()
            table[SPEEDUP + column.removeprefix(REACHED_ON)] = base / table[column].to_numpy()
    return table


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
    """compare_table of the runs (folders, folders that hold runs, or Runs already read) into out_dir/compare.csv,
    and the comparison plots (see analysis.compare_plots; timelines: a Gantt of each group's first run too;
    curves: the groups' accuracy curves); returns the table and the paths written."""
    runs = runs_of(run_dirs)
    targets = default_targets(runs) if targets is None else targets
    table = compare_table(runs, targets, baseline, metric)  # before anything is written: bad baseline, metric
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "compare.csv", index=False)
    groups, _ = group_runs(runs)
    plots = write_compare_plots(groups, table, targets, out_dir, metric, timelines, curves)
    return table, [out_dir / "compare.csv", *plots]


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
