"""Degenerate but valid runs, explained: legitimate experiments, run as asked, but never silent.

- degenerate_rounds: rounds that trained nothing (no selected device met the deadline, or every one dropped, or
  no task was handed out: the selector picked none or the strategy's configure gave none) or whose start waited
  for a device to come online, counted from rounds.csv. A round without tasks is named after the plugin that
  handed out none (summary.json no_task_from: its reference, hook, file and line; testbed/contracts.py).
- ended_early: a run that ended before its stop (stop.max_rounds, the target, stop.max_sim_time_s) because no
  device would be able to train again, with when and why: the trace file that has no interval of positive length
  or whose intervals are over, or the batteries (or memory) that keep the devices still coming online out; and a
  synchronous run whose next round waited for a device that comes only after stop.max_sim_time_s, ended there.
Both go to summary.json; degenerate_warning words them in one line for the terminal.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def degenerate_rounds(rounds: pd.DataFrame, scenario) -> dict:
    """Rounds that trained nothing, counted for summary.json and a warning: those where no selected device met the
    deadline (all cut late), those where none arrived otherwise (all dropped), those where no task was handed out,
    and (synchronous rounds) those whose start waited for a device to come online (nobody was); a hierarchical
    run's cloud rounds, each over its edge rounds, alike. Empty where there were none: legitimate experiments,
    but never silent."""
    if scenario.protocol.kind == "async" or rounds.empty:   # an asynchronous aggregation has no round to fail
        return {}
    nothing = rounds["arrived"] == 0
    counts = {"rounds_all_late": int((nothing & (rounds["late"] > 0)).sum()),
              "rounds_all_dropped": int((nothing & (rounds["late"] == 0) & (rounds["dropped"] > 0)).sum()),
              "rounds_without_tasks": int((rounds["selected"] == 0).sum())}
    if scenario.protocol.kind == "sync":   # a cloud round's edges wait inside it: its start is the last one's end
        waited = rounds["t_start_s"] > rounds["t_end_s"].shift(1, fill_value=0.0)  # the previous round's end, or 0
        counts["rounds_waiting_for_devices"] = int(waited.sum())
    counts = {name: n for name, n in counts.items() if n}
    return {"degenerate_rounds": counts} if counts else {}


def ending_facts(ending, scenario, availability) -> dict:
    """summary.json's record of how a run ended (protocols/stopping.py's Ending): ended_early where no device could
    train again, no_task_from where plugins handed out no task, stop_reason where its callbacks stopped it."""
    facts = {}
    if ending.ran_out_at is not None:  # no device could train again: said, not silent
        facts |= ended_early(scenario, availability, ending.ran_out_at, ending.first_usable_s)
    if ending.no_task_from:
        facts["no_task_from"] = list(ending.no_task_from)
    if ending.stop_reason is not None:
        facts["stop_reason"] = ending.stop_reason
    return facts


def ended_early(scenario, availability, t: float, first_usable_s: float | None = None) -> dict:
    """summary.json's record of a run that ended at simulated time t, before its stop, because no device would be
    able to train again, or (`first_usable_s`: when the first would) not before stop.max_sim_time_s;
    `availability`: the fleet's (devices/)."""
    why = (_why_nobody(scenario, availability, t) if first_usable_s is None else
           f"no device could take a task before stop.max_sim_time_s ({t:g} s): the first can at {first_usable_s:g} s")
    return {"ended_early": {"at_s": t, "why": why}}


def _why_nobody(scenario, availability, t: float) -> str:
    """Why no device can train from t on: the availability traces that are over (or were never online), or the
    resources that keep out the devices still coming online."""
    if availability.count_online(t) or np.isfinite(availability.next_online_all(t)).any():
        return ("every device online now or later has too little battery or memory for a task "
                "(resources, fleet.groups.N.battery)")
    groups_of: dict = {}  # only traces end: Markov and diurnal availability always come back
    for i, group in enumerate(scenario.fleet.groups):
        if group.availability.kind == "trace":
            groups_of.setdefault(group.availability, []).append(str(i))
    said = []
    for trace, groups in groups_of.items():
        intervals = [rows for rows in trace.model().traces if len(rows)]
        where = f"{trace.file} (fleet.groups.{','.join(groups)}.availability.file)"
        said.append(f"{where} has no interval of positive length" if not intervals else
                    f"{where}: its last interval ends at {max(rows[-1, 1] for rows in intervals):g} s")
    return "no device is online from then on: " + "; ".join(said)


def degenerate_warning(summary: dict, scenario) -> str | None:
    """The one line that says what degenerate_rounds counted and why a run ended early, with what would change it."""
    counts, early = summary.get("degenerate_rounds"), summary.get("ended_early")
    if not counts and not early:
        return None
    said = []
    if early:
        said.append(f"the run ended after {summary.get('rounds', '?')} of {scenario.stop.max_rounds} rounds, at "
                    f"{early['at_s']:g} s: {early['why']}")
    counts = counts or {}
    rounds = []
    if "rounds_all_late" in counts:
        rounds.append(f"{counts['rounds_all_late']} where no selected device met round.deadline_s "
                      f"({scenario.round.deadline_s:g} s)")
    if "rounds_all_dropped" in counts:
        rounds.append(f"{counts['rounds_all_dropped']} where every selected device went offline")
    if "rounds_without_tasks" in counts:
        who = " or ".join(summary.get("no_task_from") or [f"selection '{scenario.selection.name}'.select",
                                                            f"algorithm '{scenario.algorithm.name}'.configure"])
        rounds.append(f"{counts['rounds_without_tasks']} where no task was handed out ({who} gave none)")
    if "rounds_waiting_for_devices" in counts:
        rounds.append(f"{counts['rounds_waiting_for_devices']} that waited for a device to come online")
    if rounds:
        said.append(f"{summary.get('rounds', '?')} rounds, of which {'; '.join(rounds)}")
    keys = " and ".join(k for k in ("degenerate_rounds", "ended_early") if summary.get(k))
    return f"warning: {'; '.join(said)} (summary.json: {keys})"
