"""What the server has observed of each device: the record selectors decide from.

Semantics (all per device, (n,) arrays; a real server sees each of these):
- A task is `selected` at its dispatch and ends in one outcome: "arrived" (its update reached the server and was
  used), "surplus" (arrived, at its round's close, beyond the K-th), "stale" (arrived too stale to use), "cut"
  (still under way when its round closed, at the deadline or at the K-th arrival, or when the run ended), or
  "dropped" (its device went offline, or its battery emptied). `arrived` counts every update that reached the
  server (arrived, surplus, stale): the server received it and timed it.
- `duration_s`: the last measured task time, dispatch to arrival at the server (NaN: none arrived yet);
  `duration_sum_s` / `arrived` is its mean.
- `loss`, `loss_sq`, `loss_round`: the mean and the root-mean-square of the training losses the device last
  reported with an update the server trained (sync: the K kept; async: the buffered), and the round of it.
- `last_selected`: the round (dispatch, in async) it was last given a task in; 0 for never.
- Availability: `checks` counts the instants at which the server listed who was usable (each synchronous round's
  start; an asynchronous dispatch where its selector listed the candidates); `seen_online` how many of those
  found the device online, `online_since_s` when its current online streak was first seen (NaN while offline).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

OUTCOMES = ("arrived", "surplus", "stale", "cut", "dropped")
RECEIVED = ("arrived", "surplus", "stale")   # the server received the update, and timed it


@dataclass(frozen=True)
class Outcome:
    """How one task ended, as the server saw it."""

    device: int
    round: int                 # the round (async: dispatch) it was selected in
    outcome: str               # one of OUTCOMES
    dispatched_s: float
    ended_s: float             # its arrival, its drop, or the close that cut it
    metrics: dict = field(default_factory=dict)   # the device's training report where the server trained its
                                                  # update: train_loss, train_loss_sq, train_accuracy


@dataclass
class History:
    selected: np.ndarray
    arrived: np.ndarray
    dropped: np.ndarray
    last_selected: np.ndarray
    duration_s: np.ndarray
    duration_sum_s: np.ndarray
    loss: np.ndarray
    loss_sq: np.ndarray
    loss_round: np.ndarray
    seen_online: np.ndarray
    online_since_s: np.ndarray
    checks: int = 0

    @classmethod
    def empty(cls, n: int) -> History:
        count, nan = (lambda: np.zeros(n, dtype=np.int64)), (lambda: np.full(n, math.nan))
        return cls(selected=count(), arrived=count(), dropped=count(), last_selected=count(), duration_s=nan(),
                   duration_sum_s=np.zeros(n), loss=nan(), loss_sq=nan(), loss_round=count(),
                   seen_online=count(), online_since_s=nan())

    @property
    def n(self) -> int:
        return len(self.selected)

    def dispatched(self, devices: np.ndarray, round: int) -> None:
        """These devices were given a task in this round (dispatch)."""
        self.selected[devices] += 1
        self.last_selected[devices] = round

    def looked(self, online: np.ndarray, now: float) -> None:
        """The server listed who is online at `now` ((n,) bool)."""
        self.checks += 1
        self.seen_online += online
        # in place, as record updates the other arrays, and writing only the devices whose streak starts or ends
        # (two nested np.where over (n,) were ~2 ms of a round at 100,000 devices)
        since = self.online_since_s
        unseen = np.isnan(since)
        np.copyto(since, now, where=online & unseen)
        np.copyto(since, math.nan, where=~(online | unseen))

    def record(self, outcomes: list[Outcome]) -> None:
        """Tasks that ended."""
        self.record_columns([o.device for o in outcomes], [o.round for o in outcomes], [o.outcome for o in outcomes],
                            [o.dispatched_s for o in outcomes], [o.ended_s for o in outcomes],
                            [o.metrics for o in outcomes])

    def record_columns(self, devices: list[int], rounds: list[int], outcomes: list[str], dispatched_s: list[float],
                       ended_s: list[float], metrics: list[dict]) -> None:
        """record's tasks column by column (an entry a task in each, as an Outcome's fields), where the caller
        need not make an Outcome a task (a synchronous round's thousand)."""
        unknown = [o for o in outcomes if o not in OUTCOMES]
        if unknown:
            raise ValueError(f"unknown outcome {unknown[0]!r}; one of {', '.join(OUTCOMES)}")
        tasks = zip(devices, rounds, outcomes, dispatched_s, ended_s, metrics)
        if len(set(devices)) < len(devices):   # a device twice: in order, one at a time
            for task in tasks:
                self._record_one(*task)
            return
        # distinct devices (a round's tasks): _record_one's element-wise updates, one numpy call a column instead
        # of a few scalar ones a task (1,000 tasks a round: ~1 ms of the engine's round at 100,000 devices)
        received, took, dropped, reported, losses, squares, loss_rounds = [], [], [], [], [], [], []
        for d, r, outcome, start, end, m in tasks:
            if outcome in RECEIVED:
                received.append(d)
                took.append(end - start)
            elif outcome == "dropped":
                dropped.append(d)
            if "train_loss" in m:
                reported.append(d)
                losses.append(m["train_loss"])
                squares.append(m.get("train_loss_sq", m["train_loss"]))
                loss_rounds.append(r)
        received, dropped, reported = (np.array(d, dtype=np.int64) for d in (received, dropped, reported))
        self.arrived[received] += 1
        self.duration_s[received] = took
        self.duration_sum_s[received] += took
        self.dropped[dropped] += 1
        self.loss[reported] = losses
        self.loss_sq[reported] = squares
        self.loss_round[reported] = loss_rounds

    def _record_one(self, d: int, r: int, outcome: str, start: float, end: float, m: dict) -> None:
        if outcome in RECEIVED:
            self.arrived[d] += 1
            self.duration_s[d] = end - start
            self.duration_sum_s[d] += end - start
        elif outcome == "dropped":
            self.dropped[d] += 1
        if "train_loss" in m:
            self.loss[d] = m["train_loss"]
            self.loss_sq[d] = m.get("train_loss_sq", m["train_loss"])
            self.loss_round[d] = r
