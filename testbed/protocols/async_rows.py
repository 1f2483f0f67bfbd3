"""The rows an asynchronous aggregation writes (asynchronous.py), built from what it produced and nothing else.

Semantics:
- `Aggregated` is what aggregation r produced: its window (the tasks selected since the previous aggregation,
  and those that ended unbuffered, "dropped" or "stale"), the buffer it aggregated (each task with its
  staleness), the strategy's metrics, the scores (empty where r was not evaluated) and the tasks cut at its
  instant where it is the run's last ("unfinished").
- `aggregation_rows` gives its row of rounds.csv (recorder.round_row's columns, its span from the previous aggregation's
  instant; plus stale, unfinished, the staleness's mean and max over the aggregated tasks, NaN where none, and the
  scores) and its rows of events.csv: each task's phases, aggregated ones first ("done", their whole plan), then
  the window's in order of ending (their whole plan), then the cut ones in device order (their phases as they
  stood at the cut); each with the task's number, the model version it downloaded and its staleness (NaN but
  for the aggregated).
- `cut_into` counts tasks cut after the row was built (the on_round callbacks ended the run there) into it and
  its events, as `aggregation_rows` would have had they been cut before.
- Building rows asks the kit's recorder (round_row, event_row, add_spent) and its availability (census, at the
  aggregation's instant); round_row hands on the shared links' rows up to that instant, so the rows are built once
  an aggregation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from testbed.clock import Phase
from testbed.protocols.async_state import InFlight, Window
from testbed.protocols.availability import Availability
from testbed.protocols.recorder import Recorder

TaskRow = tuple[InFlight, str, Sequence[Phase], "int | None"]   # a task, its outcome, its phases, its staleness


@dataclass(frozen=True)
class Aggregated:
    """What aggregation r produced, for its rows."""

    r: int
    now: float                          # its instant
    window: Window                      # since the previous aggregation
    buffer: list[tuple[InFlight, int]]  # (task, staleness) aggregated
    metrics: dict                       # the strategy's
    scores: dict[str, float]            # the model's, where evaluated
    cut: list[TaskRow]                  # the tasks in flight cut at its instant, where it is the run's last


def cut_rows(in_flight: dict[int, InFlight], now: float) -> list[TaskRow]:
    """The tasks in flight, cut at `now`, in device order: each with its phases as they stand then."""
    return [(t, "unfinished", t.plan.cut_at(now), None) for _, t in sorted(in_flight.items())]


def aggregation_rows(record: Recorder, who: Availability, a: Aggregated) -> tuple[dict, list[dict]]:
    """Aggregation a.r's row of rounds.csv and its rows of events.csv (see the module's docstring)."""
    rows: list[TaskRow] = [(t, "done", t.plan.phases, tau) for t, tau in a.buffer]
    rows += [(t, why, t.plan.phases, None) for t, why in a.window.ended]
    rows += a.cut
    outcomes = [outcome for _, outcome, _, _ in rows]
    staleness = [tau for _, tau in a.buffer]
    n_online, excluded = who.census(a.now)
    row = record.round_row(a.r, a.window.t_start, a.now, n_online=n_online, excluded=excluded,
                           selected=a.window.selected, arrived=len(a.buffer), outcomes=outcomes,
                           phases=((p, t.timeline, outcome != "done") for t, outcome, phases, _ in rows
                                   for p in phases),
                           metrics=a.metrics,
                           depleted=sum(t.battery_cut for t, why in a.window.ended if why == "dropped"))
    row |= {"stale": outcomes.count("stale"), "unfinished": outcomes.count("unfinished"),
            "staleness_mean": float(np.mean(staleness)) if staleness else math.nan,
            "staleness_max": max(staleness) if staleness else math.nan, **a.scores}
    return row, events(record, a.r, rows)


def events(record: Recorder, r: int, rows: list[TaskRow]) -> list[dict]:
    """events.csv's rows of aggregation r's tasks, phase by phase."""
    return [record.event_row(r, p, outcome, t.task, t.timeline) | {"task": t.number, "version": t.version,
                                                                    "staleness": math.nan if tau is None else tau}
            for t, outcome, phases, tau in rows for p in phases]


def cut_into(record: Recorder, r: int, row: dict, events_of_r: list[dict], cut: list[TaskRow]) -> None:
    """Tasks cut after aggregation r's row and events were built, counted into them (in place)."""
    record.add_spent(row, ((p, t.timeline, True) for t, _, phases, _ in cut for p in phases))
    row["unfinished"] += len(cut)
    events_of_r += events(record, r, cut)
