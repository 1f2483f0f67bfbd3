"""Availability-aware selection, in the spirit of REFL's Intelligent Participant Selection (Abdelmoniem, Sahu,
Canini, Fahmy, "REFL: Resource-Efficient Federated Learning", EuroSys 2023).

REFL's idea: among the devices online now, prefer those predicted to stay available for the coming round, and
among those the least available ones, so that data seen rarely is not lost to the training (its public code,
ahmedcs/REFL core/client_manager.py `resampleClients`, `avail_priority`: a priority set of clients predicted
available over the round's window, topped up at random; or a draw weighted toward clients available in fewer
periods). REFL predicts availability on the device, from its own usage; here the server predicts it from what it
has observed, as below.

The rule, for each candidate i at a selection (all from the server's observations):
- its long-run availability a_i = (seen_online_i + 1) / (checks + 2): the share of the server's looks (round
  starts; async dispatches) that found it online, with a uniform prior;
- its departure rate per second online, lambda_i = (departures_i + 1) / (online_s_i + prior_session_s): a
  memoryless online session whose mean length starts at prior_session_s and is learnt from
  - departures_i: the times it was seen leaving: online at one look and offline at the next without a drop in
    between, plus each task it dropped (history.dropped: it went offline, or its battery emptied);
  - online_s_i: the seconds it was seen online: the whole gap between two looks that both found it online, half
    the gap where the second found it gone (its departure is somewhere in between);
- its predicted task time tau_i: the mean of its measured task durations (history: duration_sum_s / arrived),
  or, before any arrived, the registry's task_s (its declared rates and FLOP/s);
- the probability it stays online for its task: p_i = exp(-lambda_i tau_i).
Likely to finish: p_i >= min_p. Those are taken first, least available first (a_i ascending; ties in a random
order from the selection stream), then, where fewer than n_select are likely, the others by p_i descending.

Options and defaults: min_p = 0.9 (a likely device drops at most one task in ten), prior_session_s = 60 (one
pseudo-departure per minute online before anything is observed: weak enough that a few looks overrule it). Both
are ours, tuned on tests/selection/test_availability.py's fleet; REFL has no such figures.
Measured (tiny_blobs, 20 devices, tasks of about 10 s, 4 seeds): with sessions of 20 s on / 5 s off for half
the fleet and 300 / 600 s for the other (the rarely online are the stable ones, REFL's premise), 10 rounds drop
30 tasks against uniform's 43; with 20 / 20 s and 300 / 100 s (the rarely online are the unstable ones), 20
rounds drop 21 against 52: the min_p filter, once a few looks have shown a device leave, does the work there.
On quickstart.yaml's first 3 rounds neither drops a task (its sessions last minutes, its rounds seconds).
Deviations from REFL: the prediction is the server's, from its observations (REFL's is on the device); REFL's
staleness-aware aggregation of late updates is not part of selection (an algorithm's business here).

It sees only what a real server knows: the history's looks, drops and measured durations, the registry's
declared task time, the candidates, and what it keeps of its own looks; never the simulator's availability
model, tiers or future.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from testbed.selection.base import Registry, SelectionContext, Selector
from testbed.selection.history import History
from testbed.selection.ranking import stable_order


@dataclass(frozen=True)
class AvailabilityState:
    """What the selector keeps of the server's looks (its state: select returns a new one): the last look's
    instant and who it found online, the drops counted then, and each device's departures and seconds online seen
    so far (None before the first look)."""

    looks: int = 0
    last_look_s: float = math.nan
    was_online: np.ndarray | None = None
    dropped_then: np.ndarray | None = None
    departures: np.ndarray | None = None
    online_s: np.ndarray | None = None


@dataclass(frozen=True)
class Availability(Selector):
    min_p: float = 0.9
    prior_session_s: float = 60.0

    def __post_init__(self):
        if not 0.0 <= self.min_p <= 1.0:
            raise ValueError(f"min_p must be a probability in [0, 1] (got {self.min_p}); e.g. 0.8")
        if not self.prior_session_s > 0:
            raise ValueError(f"prior_session_s must be positive (got {self.prior_session_s}); e.g. 600")

    def init(self, registry: Registry, rounds: int, clients_per_round: int) -> AvailabilityState:
        return AvailabilityState()

    def select(self, state: AvailabilityState, ctx: SelectionContext,
               rng: np.random.Generator) -> tuple[np.ndarray, AvailabilityState]:
        candidates = ctx.candidates  # listing them is a look the history records
        state = self.watch(state, ctx.history, ctx.now)
        if not len(candidates) or ctx.n_select < 1:
            return np.empty(0, dtype=np.int64), state
        p = self.p_stay(state, ctx, candidates)
        available = (ctx.history.seen_online[candidates] + 1) / (ctx.history.checks + 2)
        shuffled = rng.permutation(len(candidates))
        # the likely to stay, least available first, then the others, likeliest first; ties in shuffled order
        # (a stable order of the filtered is the filtered stable order; only the first n_select are ranked)
        likely = shuffled[p[shuffled] >= self.min_p]
        likely = likely[stable_order(available[likely], ctx.n_select)]
        rest = shuffled[p[shuffled] < self.min_p]
        rest = rest[stable_order(-p[rest], ctx.n_select - len(likely))]
        return np.sort(candidates[np.concatenate([likely, rest])]), state

    def watch(self, state: AvailabilityState, history: History, now: float) -> AvailabilityState:
        """The state having taken in the looks the history recorded since the last selection (the last one only,
        where several were: the history keeps who was online at the latest)."""
        if history.checks == state.looks:
            return state
        online = ~np.isnan(history.online_since_s)
        if state.was_online is None:
            n = history.n
            departures, online_s = np.zeros(n, dtype=np.int64), np.zeros(n)
        else:
            gap = now - state.last_look_s
            stayed, left = state.was_online & online, state.was_online & ~online
            online_s = state.online_s + np.where(stayed, gap, np.where(left, gap / 2, 0.0))
            # a departure seen with a drop in between is the drop, which p_stay counts already
            departures = state.departures + (left & (history.dropped == state.dropped_then))
        return AvailabilityState(history.checks, now, online, history.dropped.copy(), departures, online_s)

    def p_stay(self, state: AvailabilityState, ctx: SelectionContext,
               devices: np.ndarray | None = None) -> np.ndarray:
        """Each device's probability (of these devices; default all) to stay online for its predicted task time."""
        history = ctx.history
        every = slice(None) if devices is None else devices
        arrived = history.arrived[every]
        tau = np.where(arrived > 0, history.duration_sum_s[every] / np.maximum(arrived, 1),
                       ctx.registry.task_s[every])
        departures = history.dropped[every] + (0 if state.departures is None else state.departures[every])
        online_s = 0.0 if state.online_s is None else state.online_s[every]
        rate = (departures + 1) / (online_s + self.prior_session_s)
        return np.exp(-rate * tau)
