"""Headline numbers of one run, as pure functions over its tables.

`rounds` is rounds.csv (one row per round, in round order; `accuracy` is NaN where the round was not
evaluated) and `events` is events.csv (one row per device phase). Everything `summarize` returns is a
plain Python value, so the testbed can write it straight to summary.json (NaN becomes None).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

PHASES = ("download", "compute", "upload")
# Runs that count idle energy (resources.idle_energy) also log each device's wait for its sync round to close as
# a phase of this name, outcome done: waiting, not work, so it is none of PHASES and device_phases leaves it out.
IDLE_PHASE = "idle"
# Hierarchical runs log each edge server's transfers to and from the cloud on the edge's row (device -2 - cell),
# and each device phase's edge (column `edge`) and edge round (`edge_round`: a device may train twice a round).
BACKHAUL_PHASES = ("backhaul_down", "backhaul_up")
CUT_OUTCOMES = ("dropped", "late", "surplus")
COST_KEYS = ("time_s", "round", "rounds", "bytes_up", "bytes_down", "flops")


def plain(value):
    """A numpy/pandas scalar as a plain Python value; NaN and NA as None (JSON has no NaN)."""
    if value is None or pd.isna(value):
        return None
    return value.item() if isinstance(value, np.generic) else value


LAST_ROUNDS = 3  # the FedLPS paper reports "the mean of the last three rounds"


def numeric(rounds: pd.DataFrame, column: str) -> pd.Series:
    """A rounds.csv column as numbers: coerced so that a column built from all-None values (object dtype)
    still compares as numbers, and all NaN where the run has no such column (no local test split)."""
    if column not in rounds:
        return pd.Series(np.nan, index=rounds.index, dtype="float64")
    return pd.to_numeric(rounds[column], errors="coerce")


def accuracy_of(rounds: pd.DataFrame) -> pd.Series:
    return numeric(rounds, "accuracy")


def has_local_accuracy(rounds: pd.DataFrame) -> bool:
    """Whether the run scored each device on its own test data (a scenario with a local test split)."""
    return bool(numeric(rounds, "local_accuracy").notna().any())


def mean_of_last(rounds: pd.DataFrame, column: str = "accuracy", n: int = LAST_ROUNDS) -> float:
    """Mean of `column` over the last n evaluated rounds (all of them where there are fewer): steadier than
    the final round alone, and what the papers report. NaN when the run was never evaluated."""
    return float(numeric(rounds, column).dropna().tail(n).mean())


def first_reaching(rounds: pd.DataFrame, target: float, metric: str = "accuracy") -> int | None:
    """Position of the first evaluated round with `metric` >= target; NaN rows never qualify. metric is a
    rounds.csv column: "accuracy" (global model, global test set) or "local_accuracy" (mean over devices
    of each device's accuracy on its own test data, the personalized methods' measure)."""
    hits = np.flatnonzero((numeric(rounds, metric) >= target).to_numpy())
    return int(hits[0]) if hits.size else None


def cost_to_accuracy(rounds: pd.DataFrame, target: float, metric: str = "accuracy") -> dict:
    """What it took for `metric` to first reach `target`: the simulated time and round number at which it
    was reached, how many rounds that was, and bytes / FLOPs spent up to and including that round
    (wasted work included), and joules where the run accounts energy. All values are None when the target was
    never reached."""
    keys = COST_KEYS + (("energy_J",) if "energy_J" in rounds else ())
    position = first_reaching(rounds, target, metric)
    if position is None:
        return dict.fromkeys(keys)
    spent = rounds.iloc[: position + 1]
    energy = {"energy_J": math.fsum(spent["energy_J"])} if "energy_J" in rounds else {}
    return energy | {
        "time_s": float(spent["t_end_s"].iloc[-1]),
        "round": int(spent["round"].iloc[-1]),
        "rounds": len(spent),
        "bytes_up": plain(spent["bytes_up"].sum()),
        "bytes_down": plain(spent["bytes_down"].sum()),
        "flops": plain(spent["flops"].sum()),
    }


def time_to_accuracy(rounds: pd.DataFrame, target: float, metric: str = "accuracy") -> float | None:
    """Simulated seconds (end of round) at which `metric` first reached `target`, else None."""
    return cost_to_accuracy(rounds, target, metric)["time_s"]


def summarize(rounds: pd.DataFrame, targets: list[float] = ()) -> dict:
    """The run's summary.json: final and best accuracy, totals, and the cost of each target.
    Per-target dicts are keyed by str(float(target)); None targets (no target set) are skipped. Async runs
    (rounds.csv with their columns) also get stale_total, unfinished_total and staleness_mean."""
    evaluated = accuracy_of(rounds).dropna()
    costs = {str(float(t)): cost_to_accuracy(rounds, t) for t in targets if t is not None}

    def total(column):
        return plain(rounds[column].sum())

    def per_target(key):
        return {target: cost[key] for target, cost in costs.items()}

    return {
        "rounds": len(rounds),
        "evaluations": len(evaluated),
        "final_accuracy": plain(evaluated.iloc[-1]) if len(evaluated) else None,
        "best_accuracy": plain(evaluated.max()),
        "sim_time_s": float(rounds["t_end_s"].iloc[-1]) if len(rounds) else None,
        "bytes_up_total": total("bytes_up"),
        "bytes_down_total": total("bytes_down"),
        "flops_total": total("flops"),
        "wasted_flops_total": total("wasted_flops"),
        "server_flops_total": total("server_flops") if "server_flops" in rounds else 0,
        "wasted_bytes_total": total("wasted_bytes"),
        "dropped_total": total("dropped"),
        "late_total": total("late"),
        "surplus_total": total("surplus"),
        # async runs only (sync summary.json files keep their keys): updates too stale, tasks cut at the end
        **{f"{column}_total": total(column) for column in ("stale", "unfinished") if column in rounds},
        **({"staleness_mean": mean_staleness(rounds)} if "staleness_mean" in rounds else {}),
        **resource_totals(rounds),
        "time_to_accuracy_s": per_target("time_s"),
        "rounds_to_accuracy": per_target("rounds"),
        "bytes_up_to_accuracy": per_target("bytes_up"),
        "bytes_down_to_accuracy": per_target("bytes_down"),
        "flops_to_accuracy": per_target("flops"),
        **({"energy_to_accuracy_J": per_target("energy_J")} if "energy_J" in rounds else {}),
    }


def resource_totals(rounds: pd.DataFrame) -> dict:
    """Where the run models resources: total and wasted joules, online devices kept out by memory or battery
    (summed over rounds: device-rounds), and tasks dropped by an empty battery."""
    totals = {f"{column}_total": math.fsum(rounds[column]) for column in ("energy_J", "wasted_energy_J")
              if column in rounds}
    return totals | {f"{column}_total": plain(rounds[column].sum())
                     for column in ("excluded_memory", "excluded_battery", "depleted") if column in rounds}


def mean_staleness(rounds: pd.DataFrame) -> float | None:
    """Mean staleness over every aggregated update: each row's staleness_mean weighted by its `arrived`
    (rows that aggregated nothing have none); None where no update was aggregated."""
    staleness, arrived = numeric(rounds, "staleness_mean"), numeric(rounds, "arrived")
    counted = staleness.notna() & (arrived > 0)
    updates = arrived[counted].sum()
    return float((staleness[counted] * arrived[counted]).sum() / updates) if updates > 0 else None


def natural_order(device):
    """Sort key for device ids putting "phone-2" before "phone-10"."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(device))]


def phase_seconds(events: pd.DataFrame) -> pd.Series:
    return events["end_s"] - events["start_s"]


def device_phases(events: pd.DataFrame) -> pd.DataFrame:
    """The devices' work in events.csv: without the server's own work (phase "server") and without idle waits
    (IDLE_PHASE), which the breakdowns count as waiting from the round's times, as in runs that do not log them."""
    return events[events["phase"].isin(PHASES)]


def task_ids(events: pd.DataFrame) -> pd.Series:
    """Each row's task: the `task` column of async runs, else its (device, round) pair numbered (one task per
    device and round in sync runs; per edge round too in hierarchical runs)."""
    if "task" in events:
        return events["task"]
    keys = ["device", "round"] + (["edge_round"] if "edge_round" in events else [])
    return events.groupby(keys, sort=False, dropna=False).ngroup()


def unused_work(events: pd.DataFrame) -> pd.Series:
    """True for every phase of a task whose update the server did not use: a phase whose task has any row
    with outcome other than done (dropped, late, surplus, stale, unfinished). The testbed writes one outcome
    on all of a task's rows, so this is the row's own outcome != "done"; a table marking only the cut phase
    still wastes the download and compute that led up to it."""
    cut = events["outcome"] != "done"
    return cut.groupby(task_ids(events), dropna=False).transform("any")


def time_breakdown(events: pd.DataFrame) -> pd.DataFrame:
    """Per device (the index): seconds in download / compute / upload, busy seconds, wasted seconds
    (all phases of device-rounds whose update was not used), rounds taken part in, and how many of
    those rounds ended dropped / late / surplus. This is the "why": who straggled, dropped, or
    spent its time communicating."""
    events = device_phases(events)
    seconds = phase_seconds(events)
    per_phase = seconds.groupby([events["device"], events["phase"]]).sum().unstack("phase")
    table = per_phase.reindex(columns=list(PHASES)).fillna(0.0)
    table.columns = [f"{phase}_s" for phase in PHASES]
    table["busy_s"] = table.sum(axis=1)
    unused = unused_work(events)
    wasted = seconds[unused].groupby(events["device"][unused]).sum()
    table["wasted_s"] = wasted.reindex(table.index, fill_value=0.0)
    table["rounds"] = events.groupby("device")["round"].nunique()
    outcomes = pd.crosstab(events["device"], events["outcome"])
    table[list(CUT_OUTCOMES)] = outcomes.reindex(columns=list(CUT_OUTCOMES), fill_value=0)
    table.index.name = "device"
    return table.loc[sorted(table.index, key=natural_order)]


def round_breakdown(rounds: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """Per round (the index): where the selected devices' time went, in device-seconds.
    compute_s / communication_s: phases whose update was used; wasted_s: every phase of a device-round
    that was dropped, late or surplus; backhaul_s (hierarchical runs only): each task's edge's seconds on its
    backhaul that round, when its device could only wait for the model to and from the cloud; idle_s: selected
    devices (tasks) x round length minus all of the above (waiting for the round to end, or offline), floored at
    zero."""
    backhaul = backhaul_waits(events)
    events = device_phases(events)
    seconds = phase_seconds(events)
    kind = np.where(unused_work(events), "wasted_s",
                    np.where(events["phase"] == "compute", "compute_s", "communication_s"))
    busy = seconds.groupby([events["round"].to_numpy(), kind]).sum().unstack()
    columns = ["compute_s", "communication_s", "wasted_s"]
    table = busy.reindex(index=rounds["round"].to_numpy(), columns=columns).fillna(0.0)
    if backhaul is not None:
        table["backhaul_s"] = backhaul.reindex(table.index, fill_value=0.0)
    length = (rounds["t_end_s"] - rounds["t_start_s"]).to_numpy()
    available = rounds["selected"].to_numpy() * length
    table["idle_s"] = np.clip(available - table.sum(axis=1).to_numpy(), 0.0, None)
    table.index.name = "round"
    return table


def backhaul_waits(events: pd.DataFrame) -> pd.Series | None:
    """Per round (the index), summed over the devices' tasks: the seconds their edge spent on its backhaul that
    round (hierarchical runs); None for other runs."""
    if "edge" not in events:
        return None
    links = events[events["phase"].isin(BACKHAUL_PHASES)]
    per_edge = phase_seconds(links).groupby([links["round"], links["edge"]]).sum()
    work = device_phases(events)
    tasks = work.groupby(task_ids(work)).agg(round=("round", "first"), edge=("edge", "first"))
    waits = per_edge.reindex(pd.MultiIndex.from_frame(tasks[["round", "edge"]]), fill_value=0.0)
    return waits.groupby(level="round").sum()


UTILISATION_PARTS = ("compute_s", "communication_s", "wasted_s", "idle_wait_s", "idle_other_s")


def device_utilisation(rounds: pd.DataFrame, events: pd.DataFrame, devices=None) -> pd.DataFrame:
    """Per device (the index), over the run's span_s (0 to the last rounds.t_end_s), in seconds:
    compute_s / communication_s: compute / download + upload phases of tasks whose update was used;
    wasted_s: every phase of tasks whose update was not used; busy_s: their sum; idle_s = span_s - busy_s
    (between tasks, offline included); utilisation = busy_s / span_s;
    wait_s: summed over used tasks, the time from its upload's end to the end (t_end_s) of the round or
    aggregation that used it (the round closing in sync runs, the buffer in async ones);
    idle_wait_s: the part of idle_s in which an update of the device waited so (wait_s in sync runs; less in
    async ones where the device started another task or had two updates waiting), idle_other_s the rest.
    The UTILISATION_PARTS sum to span_s. devices: every device to list, those without tasks idle throughout."""
    events = device_phases(events)
    seconds = phase_seconds(events)
    unused = unused_work(events)
    kind = np.where(unused, "wasted_s", np.where(events["phase"] == "compute", "compute_s", "communication_s"))
    table = seconds.groupby([events["device"].to_numpy(), kind]).sum().unstack()
    index = sorted(set(table.index) | set(devices if devices is not None else ()), key=natural_order)
    table = table.reindex(index=index, columns=list(UTILISATION_PARTS[:3])).fillna(0.0)
    table["busy_s"] = table.sum(axis=1)
    span = float(rounds["t_end_s"].iloc[-1]) if len(rounds) else 0.0
    table["span_s"] = span
    table["idle_s"] = span - table["busy_s"]
    table["utilisation"] = table["busy_s"] / span if span > 0 else np.nan

    used = events[~unused]
    tasks = used.groupby(task_ids(used)).agg(device=("device", "first"), round=("round", "first"),
                                             start=("end_s", "max"))  # a wait starts at its upload's end
    tasks["end"] = tasks["round"].map(rounds.set_index("round")["t_end_s"])
    tasks = tasks.dropna(subset=["end"])
    wait = (tasks["end"] - tasks["start"]).groupby(tasks["device"]).sum()
    table["wait_s"] = wait.reindex(table.index, fill_value=0.0)
    busy = pd.DataFrame({"device": events["device"], "start": events["start_s"], "end": events["end_s"]})
    table["idle_wait_s"] = _waiting_not_busy(tasks, busy).reindex(table.index, fill_value=0.0)
    table["idle_other_s"] = table["idle_s"] - table["idle_wait_s"]
    table.index.name = "device"
    return table[["compute_s", "communication_s", "wasted_s", "busy_s", "wait_s", "idle_s", "idle_wait_s",
                  "idle_other_s", "span_s", "utilisation"]]


def _waiting_not_busy(waits: pd.DataFrame, busy: pd.DataFrame) -> pd.Series:
    """Per device: seconds inside some of its wait intervals and none of its busy ones (columns device,
    start, end), by a sweep over the intervals' ends."""
    marks = pd.concat([pd.DataFrame({"device": frame["device"], "t": frame[edge], "wait": w * sign,
                                     "busy": (1 - w) * sign})
                       for frame, w in ((waits, 1), (busy, 0)) for edge, sign in (("start", 1), ("end", -1))])
    if marks.empty:
        return pd.Series(dtype="float64")
    steps = marks.groupby(["device", "t"])[["wait", "busy"]].sum().groupby(level="device").cumsum()
    t = pd.Series(steps.index.get_level_values("t"), index=steps.index)
    length = t.groupby(level="device").shift(-1) - t  # until the next mark; NaN after the last
    waiting = (steps["wait"] > 0) & (steps["busy"] == 0)
    return length[waiting].groupby(level="device").sum()
