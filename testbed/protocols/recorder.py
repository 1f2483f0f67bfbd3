"""What a run leaves in its folder, as its protocol hands it on: a part of the kit (kit.py).

Semantics:
- `round_row`: a row of rounds.csv before evaluation (its span, who was online, selected, arrived and cut, what its
  phases spent, the strategy's training loss, and, where modelled, shared links' rows up to its end and the
  batteries'); `add_spent` counts phases cut after it was built into it; `event_row`: a row of events.csv.
  Building rows changes nothing but the shared links' record (round_row hands on its rows up to the row's end).
- `scores`: the model's evaluation where round r is due one (protocols/evaluation.py), {} where it is not.
- `write`: hands a round's row and event rows to the run folder (the engine's on_round).
- `close_round`: a synchronous round's end: scored where due, the row shown to the on_round callbacks, written,
  the model checked, a checkpoint where due; True where the run stops there. The rules are the kit's
  (stopping.py), given as `rules`.
- `checkpoint`: hands the end of round (aggregation) r to the engine's on_checkpoint: the model and device states,
  the selection and strategy streams, what the protocol kept, the participation's record (history, selector
  state: protocol["selection"]), shared links' rows not yet written (protocol["links"]) and the resources' state.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable

import numpy as np

from testbed.algorithms.base import ServerState, Task
from testbed.checkpoint import Checkpoint
from testbed.columns import extra_metric_rows
from testbed.clock import Phase, Timeline
from testbed.network.contention import Waits, phase_wait
from testbed.network.linklog import LinkLog
from testbed.network.topology import Topology
from testbed.protocols.evaluation import Evaluation
from testbed.protocols.participation import Participation
from testbed.protocols.stopping import StopRules
from testbed.resources import Resources
from testbed.schema.scenario import Scenario

Spent = Iterable[tuple[Phase, "Timeline | None", bool]]   # phases, each with its task's timeline and whether wasted


class Recorder:
    """The rows, scores, writes and checkpoints of one run."""

    def __init__(self, scenario: Scenario, resources: Resources, topology: Topology | None, links: LinkLog,
                 evaluation: Evaluation, rules: StopRules, participation: Participation,
                 streams: tuple[np.random.Generator, np.random.Generator], on_round: Callable[[dict, list[dict]], None],
                 on_checkpoint: Callable[[Checkpoint], None] | None):
        self.scenario, self._resources, self.topology, self.links = scenario, resources, topology, links
        self._evaluation, self._rules, self._participation = evaluation, rules, participation
        self._streams, self._on_round, self._on_checkpoint = streams, on_round, on_checkpoint

    # ---- rows ---------------------------------------------------------------------------------------------
    def round_row(self, r: int, t_start: float, t_end: float, *, n_online: int, excluded: dict[str, int],
                  selected: int, arrived: int, outcomes: list[str], phases: Spent, metrics: dict,
                  depleted: int) -> dict:
        """The row of rounds.csv of round (aggregation) r, before evaluation: its span, how many devices were
        online (and kept out by memory and battery), selected, arrived and cut for each reason (`outcomes`, one
        per cut task), what its `phases` spent (each with its task's timeline, None for an idle wait, and whether
        its work is wasted), the strategy's training loss, and what batteries add (`depleted`: tasks dropped by
        an empty battery)."""
        row = {"round": r, "t_start_s": t_start, "t_end_s": t_end, "online": n_online, "selected": selected,
               "arrived": arrived, "dropped": outcomes.count("dropped"), "late": outcomes.count("late"),
               "surplus": outcomes.count("surplus"), **self._spent(phases), "server_flops": 0,
               "train_loss": metrics.get("train_loss", math.nan), "accuracy": math.nan, "loss": math.nan,
               "local_accuracy": math.nan, "local_accuracy_p10": math.nan,
               "metrics": extra_metric_rows(r, metrics)}   # metrics.csv's rows
        row |= excluded
        if self.topology is not None:
            # a round's transfers end with it; an aggregation's go on, and their rest goes into the next one
            row["links"] = self.links.until(t_end, r, keep_rest=self.scenario.protocol.kind == "async")
        if self._resources.batteries is not None:
            row |= {"depleted": depleted, "battery": self._resources.battery_rows(r, t_end)}
        return row

    def add_spent(self, row: dict, phases: Spent) -> None:
        """Count more phases into a row round_row built (tasks cut after it was built): sums, and the longest wait."""
        for column, value in self._spent(phases).items():
            row[column] = max(row[column], value) if column == "network_wait_max_s" else row[column] + value

    def _spent(self, phases: Spent) -> dict[str, int]:
        """Bytes and FLOPs of these phases, spent and wasted; and their joules where energy is accounted."""
        spent = {"bytes_down": 0, "bytes_up": 0, "flops": 0, "wasted_bytes": 0, "wasted_flops": 0}
        joules, wasted_joules = [], []
        energy = self._resources.energy is not None
        waits = Waits() if self.topology is not None else None
        for ph, timeline, wasted in phases:
            if energy:
                joules.append(self._resources.joules(ph))
                wasted_joules += joules[-1:] if wasted else []
            if timeline is None:
                continue
            nbytes, flops = timeline.spent(ph.phase, ph.end_s - ph.start_s, ph.completed)
            spent["bytes_down" if ph.phase == "download" else "bytes_up"] += nbytes
            spent["flops"] += flops
            if wasted:
                spent["wasted_bytes"] += nbytes
                spent["wasted_flops"] += flops
            if waits is not None:
                waits.add(ph, timeline, nbytes)
        spent |= {} if waits is None else waits.columns()
        if not energy:
            return spent
        return spent | {"energy_J": math.fsum(joules), "wasted_energy_J": math.fsum(wasted_joules)}

    def event_row(self, r: int, p: Phase, outcome: str, task: Task | None, timeline: Timeline | None = None) -> dict:
        """The row of events.csv of phase p of a task of round (aggregation) r, which ended as `outcome`; a
        probe's phase has no task (its ratio NaN). With shared links, its task's timeline gives its wait."""
        ratio = math.nan if task is None or task.ratio is None else task.ratio
        row = {"device": p.device, "round": r, "phase": p.phase, "start_s": p.start_s, "end_s": p.end_s,
               "outcome": outcome, "ratio": ratio}
        if self._resources.energy is not None:   # in place: 3,000 rows a round at 100,000 devices
            row["energy_J"] = self._resources.joules(p)
        if self.topology is not None:
            row["waited_s"] = phase_wait(p, timeline)
        return row

    # ---- scores, writes, checkpoints ------------------------------------------------------------------------
    def scores(self, state: ServerState, r: int, t_previous: float, t: float, final: bool) -> dict[str, float]:
        """The model's scores where round r, ending at t after the previous one ended at t_previous, is evaluated
        (protocols/evaluation.py; `final`: the run's last round is); {} where it is not."""
        return self._evaluation.scores(state) if self._evaluation.due(r, t_previous, t, final) else {}

    def write(self, row: dict, events: list[dict]) -> None:
        """Hand round r's row and event rows to the run folder."""
        self._on_round(row, events)

    def close_round(self, r: int, state: ServerState, metrics: dict, row: dict, events: list[dict],
                    t_previous: float, now: float) -> bool:
        """The end of synchronous round r at `now` (the previous one ended at t_previous): the model scored where
        due, the row shown to the on_round callbacks and written, the model checked, a checkpoint where due; True
        where the run stops here (the target reached, or the callbacks asked)."""
        rules = self._rules
        scores = self.scores(state, r, t_previous, now, final=rules.is_last(r))
        row |= scores
        asked = rules.asked_to_stop(row)
        self.write(row, events)
        rules.check_finite(r, metrics, scores)
        if asked or rules.reached_target(scores):
            return True
        if not rules.is_last(r) and rules.checkpoint_due(r - 1, r):
            self.checkpoint(r, now, state, finished=False)
        return False

    def checkpoint(self, r: int, now: float, state: ServerState, finished: bool,
                   protocol: dict | None = None) -> None:
        """Hand the end of round (aggregation) r, at simulated time `now`, to on_checkpoint, with the streams, the
        participation's record and the resources' state; `protocol`: what the protocol carries on of its own."""
        if self._on_checkpoint is not None:
            protocol = (protocol or {}) | {"selection": self._participation.saved(), "links": self.links.pending}
            if self.links.flows is not None:
                protocol["link_flows"] = self.links.flows.saved()
            selection, strategy_rng = self._streams
            self._on_checkpoint(Checkpoint(r, now, state, selection.bit_generator.state,
                                           strategy_rng.bit_generator.state, finished, protocol=protocol,
                                           resources=self._resources.state()))
