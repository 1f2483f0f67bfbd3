"""TiFL: tier-based selection (Chai et al., "TiFL: A Tier-based Federated Learning System", HPDC 2020,
arXiv 2001.09249).

The rule. The server profiles each client's latency and sorts the clients into `tiers` groups of about equal
size, fastest first (equal-size chunks of the latency order: quantiles). Each round it draws ONE tier and the
round's clients uniformly inside it, so that a round's participants are alike in speed and a round waits for no
straggler of a slower tier.
- static policy: the tier is drawn with fixed `probabilities` (default uniform);
- adaptive policy (the paper's adaptive tier selection): every tier holds `credits`, the number of rounds it
  may still be chosen in (a chosen tier spends one; a tier without credits is not drawn), so that no tier is
  starved nor over-used; every `interval` rounds (I) the tiers with credits are ranked by accuracy, ascending,
  and with n such tiers and D = n(n+1)/2 the least accurate gets probability n/D, the next (n-1)/D, ..., the
  most accurate 1/D (tiers without credits 0): the tiers the model serves worst are trained most.

Defaults and where they come from (the paper's own text was not among the searched material; these are its
public implementations): 5 tiers and I = 10 as WwZzz/easyFL's algorithm/TiFL.py (init_algo_para T 5, I 10);
the credits, ceil(rounds / tiers) per tier, and the probability update n/D, (n-1)/D, ..., 1/D over the tiers with
credits as bacox/fltk's fltk/strategy/client_selection/tifl.py (tifl_init, change_probs); the update at rounds
I+1, 2I+1, ... as easyFL's (`(round-1) % I == 0 and round-1 >= I`); the tier drawn among those with credits,
their probabilities renormalised, as fltk's select_tier. The credits' round count is stop.max_rounds (init).

It sees only what a real server knows: the registry, the history, the candidates and what it was told in
`observe`; never the simulator's ground truth (no fleet, no capability tiers, no availability model).

Deviations from the paper, and choices it leaves open:
- Profiling: TiFL runs a profiling round on every client before training. Here a device's latency is its
  registry.task_s (what its declared figures predict: the profile stands in for the profiling round) until one
  of its tasks is timed; then its last measured duration (history.duration_s, dispatch to arrival). A task cut
  at a round's close was under way at least (close - dispatch): its latency is raised to that where larger.
- Re-tiering: the tiers are cut afresh at every round from the latest latencies (the paper re-profiles
  periodically; the testbed measures every round, so the tiers follow at no cost).
- Tier accuracy: the paper evaluates the global model on each tier's clients' test data. The testbed's held-out
  evaluation is global, so a tier's accuracy here is the mean of the training accuracies its devices last
  reported with an update the server used (Outcome.metrics['train_accuracy']); a tier none of whose devices
  has reported counts as accuracy 0 (the least accurate: it is explored first).
- A tier with fewer usable candidates than the round asks for (offline, busy, out of battery) is topped up from
  its neighbours, nearest first (the faster of two at the same distance first), drawn uniformly inside each:
  the paper assumes a tier always has enough clients.
- When every tier has spent its credits (a run longer than stop.max_rounds says, or small `credits`), each tier
  is given its credits again.
ASYNC is False: TiFL picks a synchronous round's participants together.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar, Literal

import numpy as np

from testbed.selection.base import Registry, SelectionContext, Selector, select_uniform
from testbed.selection.history import RECEIVED, History, Outcome

NOT_REPORTED = 0.0  # the accuracy of a tier none of whose devices has reported one yet


def cut_tiers(latency_s: np.ndarray, tiers: int) -> list[np.ndarray]:
    """Device ids in `tiers` groups of about equal size by latency, fastest first (ties by id)."""
    return np.array_split(np.argsort(latency_s, kind="stable"), tiers)


def ranked_probabilities(accuracy: np.ndarray, credits: np.ndarray) -> np.ndarray:
    """The adaptive policy's tier probabilities: among the n tiers with credits, ranked by accuracy ascending
    (ties by tier), n/D, (n-1)/D, ..., 1/D with D = n(n+1)/2; 0 for a tier without credits."""
    live = np.flatnonzero(credits > 0)
    n = len(live)
    probs = np.zeros(len(accuracy))
    order = live[np.argsort(accuracy[live], kind="stable")]
    probs[order] = np.arange(n, 0, -1) / (n * (n + 1) / 2)
    return probs


@dataclass(frozen=True)
class TiFLState:
    """What TiFL learns across rounds (its state: init, select and observe return a new one)."""

    latency_s: np.ndarray     # each device's profiled latency: declared, then measured
    accuracy: np.ndarray      # each device's last reported training accuracy (NaN: none)
    allotment: int            # the credits each tier is given (again, once all are spent)
    tier_credits: np.ndarray  # each tier's credits left
    tier_probs: np.ndarray    # each tier's probability, fastest first


@dataclass(frozen=True)
class TiFL(Selector):
    tiers: int = 5
    policy: Literal["adaptive", "static"] = "adaptive"
    interval: int = 10                           # I: rounds between the adaptive policy's probability updates
    probabilities: list[float] | None = None     # the static policy's (and the adaptive one's first) tier
                                                 # probabilities, fastest tier first; default uniform
    credits: int | None = None                   # rounds each tier may be chosen in; default ceil(rounds / tiers)

    ASYNC: ClassVar[bool] = False

    def __post_init__(self):
        if self.tiers < 1:
            raise ValueError(f"tiers must be at least 1 (got {self.tiers}); the paper uses 5")
        if self.interval < 1:
            raise ValueError(f"interval must be at least 1 round (got {self.interval})")
        if self.credits is not None and self.credits < 1:
            raise ValueError(f"credits must be at least 1 (got {self.credits}); leave it out for rounds / tiers")
        if self.probabilities is not None:
            p = np.asarray(self.probabilities, dtype=float)
            if len(p) != self.tiers or (p < 0).any() or not math.isclose(p.sum(), 1.0, abs_tol=1e-9):
                raise ValueError(f"probabilities must be {self.tiers} non-negative numbers (one a tier, fastest "
                                 f"first) summing to 1 (got {self.probabilities})")

    def init(self, registry: Registry, rounds: int, clients_per_round: int) -> TiFLState:
        allotment = self.credits or math.ceil(rounds / self.tiers)
        return TiFLState(latency_s=registry.task_s.astype(np.float64), accuracy=np.full(registry.n, math.nan),
                         allotment=allotment, tier_credits=np.full(self.tiers, allotment, dtype=np.int64),
                         tier_probs=(np.full(self.tiers, 1 / self.tiers) if self.probabilities is None
                                     else np.asarray(self.probabilities, dtype=np.float64)))

    def tier_accuracy(self, state: TiFLState, tiers: list[np.ndarray]) -> np.ndarray:
        """Each tier's mean reported training accuracy (NOT_REPORTED where none of its devices reported)."""
        accuracy = state.accuracy
        return np.array([np.nanmean(accuracy[t]) if np.isfinite(accuracy[t]).any() else NOT_REPORTED
                         for t in tiers])

    def select(self, state: TiFLState, ctx: SelectionContext,
               rng: np.random.Generator) -> tuple[np.ndarray, TiFLState]:
        tiers = cut_tiers(state.latency_s, self.tiers)
        if self.policy == "static":
            tier = int(rng.choice(self.tiers, p=state.tier_probs))
        else:
            tier, state = self._spend_credit(state, ctx.round, tiers, rng)
        usable = np.zeros(ctx.registry.n, dtype=bool)
        usable[ctx.candidates] = True
        picked = [np.zeros(0, dtype=np.int64)]
        for t in sorted(range(self.tiers), key=lambda t: (abs(t - tier), t)):  # the tier, then its neighbours
            left = ctx.n_select - sum(map(len, picked))
            if left <= 0:
                break
            picked.append(select_uniform(np.sort(tiers[t][usable[tiers[t]]]), left, rng))
        return np.sort(np.concatenate(picked)), state

    def _spend_credit(self, state: TiFLState, round: int, tiers: list[np.ndarray],
                      rng: np.random.Generator) -> tuple[int, TiFLState]:
        """The adaptive policy's tier for this round: probabilities re-ranked every `interval` rounds, drawn
        among the tiers with credits, the chosen one spending one."""
        credits, probs = state.tier_credits.copy(), state.tier_probs
        if not (credits > 0).any():
            credits[:] = state.allotment
        if (round - 1) % self.interval == 0 and round - 1 >= self.interval:
            probs = ranked_probabilities(self.tier_accuracy(state, tiers), credits)
        live = np.where(credits > 0, probs, 0.0)
        if live.sum() <= 0:  # the tiers left with credits had probability 0: draw them alike
            live = (credits > 0).astype(np.float64)
        tier = int(rng.choice(self.tiers, p=live / live.sum()))
        credits[tier] -= 1
        return tier, replace(state, tier_credits=credits, tier_probs=probs)

    def observe(self, state: TiFLState, round: int, now: float, outcomes: list[Outcome],
                history: History) -> TiFLState:
        latency_s, accuracy = state.latency_s.copy(), state.accuracy.copy()
        for o in outcomes:
            if o.outcome in RECEIVED:
                latency_s[o.device] = history.duration_s[o.device]
            elif o.outcome == "cut":
                latency_s[o.device] = max(latency_s[o.device], o.ended_s - o.dispatched_s)
            if "train_accuracy" in o.metrics:
                accuracy[o.device] = o.metrics["train_accuracy"]
        return replace(state, latency_s=latency_s, accuracy=accuracy)
