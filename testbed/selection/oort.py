"""Oort: guided participant selection (Lai, Zhu, Madhyastha, Chowdhury, "Oort: Efficient Federated Learning via
Guided Participant Selection", OSDI 2021), as its public code runs it: SymbioticLab/FedScale's
thirdparty/oort/oort.py (commit 3e5ba36) with the defaults of fedscale/cloud/config_parser.py (0f1a07e), the
utility of fedscale/cloud/execution/torch_client.py (036cee4) and the feedback of aggregation/aggregator.py
(0f1a07e); SymbioticLab/Oort's oort/oort.py (f5fccf3) and training/argParser.py (25c8853) give the table's other
column (a later argParser, 11494b8, turns T off with round_threshold 101 and has 0.98, 0.95 for decay, clip).

The rule, each round (each dispatch in async), picking k = n_select among the usable candidates:
- statistical utility of device i: U_i = |B_i| sqrt(mean of its squared training losses), from the device's
  report with its last trained update (history.loss_sq, the RMS of its minibatch losses); |B_i| is its number
  of samples (registry.num_samples), the paper's |B_i|, capped at `samples_cap` where given: FedScale's
  min(samples, local_steps x batch_size) (torch_client.py), which is num_samples whenever a task passes over
  the device's data at least once (the testbed's default local_epochs), so set samples_cap = local_steps x
  batch_size only where client.local_steps stops short of that;
- score of a device already tried: clip U_i at the clip_bound quantile of the explored candidates' utilities,
  rescale, (min(U_i, clip) - 0.999 min U) / max(max U - 0.999 min U, 1e-4) as the code does, and add the temporal
  uncertainty sqrt(0.1 ln(round) / L_i), L_i the round (dispatch) it was last given a task in
  (history.last_selected); then the system factor: times (T / t_i)^round_penalty where t_i > T;
- t_i: its last measured task time (history.duration_s), else its registered prediction (registry.task_s), and at
  least as long as its last task that was cut before arriving ran (the server saw it run that long); under
  compute: latency the measured times are the latency clock's and the registered prediction stays FLOPs over
  FLOP/s, what a device declares (testbed/latency/clock.py); T, the
  preferred duration: the round_threshold percentile of every device's t_i (sorted[int(N x threshold / 100)]),
  infinite at 100;
- epsilon = max(exploration_factor x exploration_decay^a, exploration_min), a = the rounds (aggregations) observed
  so far plus one (FedScale decays before its first pick); int(k x epsilon) slots go to exploration, the rest to
  exploitation;
- exploitation, among candidates tried before: the cut-off score c = cut_off_util x the score of rank
  (exploited + 1); keep those scoring at least c, and at least floor(exploit_pool x exploited) + 1 of the best
  (FedScale's "at least 10 times" augmentation; 0 gives Oort's code); draw by score, without replacement;
- exploration, among candidates never given a task: weight = |B_i| x its system factor from registry.task_s
  (data size x speed); keep the int(sample_window x picks) heaviest, draw the picks by weight, without replacement;
- the pacer, every pacer_step rounds (aggregations): with S, S' the sums over the last two windows of each round's
  mean utility of the exploited devices that reported, |S - S'| <= 0.1 S' relaxes the threshold by pacer_delta
  (up to 100), |S - S'| >= 5 S' tightens it by pacer_delta (down to pacer_delta);
- blacklist (off by default): the devices given a task more than blacklist_rounds times, most-picked first, at most
  int(blacklist_max_len x N) of them, are never picked again.

It decides from what a real server knows: the registry (declared figures), the history (tasks, outcomes, measured
durations, reported losses), the candidates of this instant and its own observations; never the simulator's
ground truth (fleet, capability tiers, fluctuating rates, availability model).

Options (FedScale's defaults; Oort's code where it differs):
    option              default   Oort's code   meaning
    exploration_factor  0.9       0.9           epsilon at start
    exploration_decay   0.98      0.95          epsilon's factor per round
    exploration_min     0.3       0.2           epsilon's floor
    round_threshold     30        10            percentile of durations that is T at start
    round_penalty       2.0       2.0           alpha of the system factor
    clip_bound          0.9       0.98          quantile where utilities are clipped
    cut_off_util        0.05      0.7           the cut-off: this fraction of the score at rank exploited + 1
    exploit_pool        10        0             keep at least this many times the exploited, best first
    sample_window       5.0       5.0           exploration draws among this many times its picks, heaviest
    pacer_step          20        20            rounds (aggregations) per pacer window
    pacer_delta         5         5             percentile points the pacer moves T by
    blacklist_rounds    None      None (-1)     blacklist devices picked more than this many times; None: off
    blacklist_max_len   0.3       0.3           at most this share of the fleet blacklisted
    samples_cap         None      -             |B_i| = min(num_samples, samples_cap)

Deviations from the code, each a known fault or a choice the testbed forces:
- FedScale keeps the previous round's explored list when no never-tried device is online, re-picking them (fewer
  than K, or duplicates); here exploration is drawn afresh each time, and the slots it cannot fill go to
  exploitation (and those exploitation cannot fill to exploration): min(k, candidates) devices, all by score.
- Oort's code tops up to K at random and counts those in the pacer: nothing here is picked at random outside
  the two draws, and only exploited devices' reports feed the pacer.
- FedScale slices its blacklist with a float (an error when it caps): the cap is int(blacklist_max_len x N).
  A blacklisted device is not picked even where that leaves fewer than k picks.
- Utility: the RMS of all the task's minibatch losses (FedScale squares the last minibatch's per-sample losses);
  a device tried but whose update was never trained (cut, surplus, stale, dropped) keeps its last reported utility
  or, if it never reported one, the mean of the explored candidates' (FedScale gives such stragglers the round's
  mean); a straggler's report does not feed the pacer. Clipping and rescaling use the explored candidates'
  utilities (FedScale mixes in the never-tried clients' data sizes).
- The pacer moves T one round later than FedScale's code (thirdparty/oort/oort.py): FedScale judges while it
  selects round 2 x pacer_step, 3 x pacer_step, ... from the rounds before it (its history's first entry is an
  empty round 0, so its windows are rounds 0-19 and 20-39); here observe counts the aggregations and the next
  selection judges whole windows of them (rounds 1-20 and 21-40), so T moves for round 41 where FedScale's moves
  for round 40. Kept rather than aligned: the committed studies' tables were made with it, and a one-round shift
  every 20 rounds is within what their seeds resolve.
- FedScale takes the exploitation cut-off at rank exploited + 1, which fails where every explored client is
  exploited: the last rank stands in there.
- Asynchronous dispatch (protocol.kind: async): the round is the dispatch number (history.last_selected counts
  dispatches too) and k the free slots; epsilon and the pacer count aggregations (observe is called once per
  aggregation; a second call for the same aggregation, the run's last, adds to it); k x epsilon is rounded at
  random (up with probability its fraction) so that exploration keeps its share when slots free one at a time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from testbed.selection.base import Registry, SelectionContext, Selector
from testbed.selection.history import RECEIVED, History, Outcome
from testbed.selection.ranking import stable_order

STALL, JUMP = 0.1, 5.0   # the pacer: a window's utility within 10% of the previous one's relaxes T, 5-fold tightens it
CLIP_FLOOR = 1e-4        # the code's floor of the utilities' range and of a duration


@dataclass(frozen=True)
class OortState:
    """What Oort learns across rounds (its state: init, select and observe return a new one)."""

    threshold: float           # the percentile of durations that is T, as the pacer moves it
    aggregations: int = 0      # rounds (aggregations) observed
    observed_round: int = 0    # the last one
    window_sum: list[float] = field(default_factory=list)   # each recent round's summed utility of the exploited
    window_count: list[int] = field(default_factory=list)   # that reported, and how many reported
    paced_at: int = 0          # the aggregations count at the pacer's last judgement
    exploiting: list[int] = field(default_factory=list)     # devices picked by exploitation whose task has not
                                                            # ended yet
    samples: np.ndarray = field(default_factory=lambda: np.zeros(0))  # |B_i|
    cut_s: np.ndarray = field(default_factory=lambda: np.zeros(0))    # how long its last task ran before it was
                                                                      # cut, since its last arrival; 0: none


@dataclass(frozen=True)
class Oort(Selector):
    exploration_factor: float = 0.9
    exploration_decay: float = 0.98
    exploration_min: float = 0.3
    round_threshold: float = 30.0
    round_penalty: float = 2.0
    clip_bound: float = 0.9
    cut_off_util: float = 0.05
    exploit_pool: float = 10.0
    sample_window: float = 5.0
    pacer_step: int = 20
    pacer_delta: float = 5.0
    blacklist_rounds: int | None = None
    blacklist_max_len: float = 0.3
    samples_cap: int | None = None

    def __post_init__(self):
        for name, low, high in (("exploration_factor", 0, 1), ("exploration_decay", 0, 1), ("clip_bound", 0, 1),
                                ("cut_off_util", 0, 1), ("blacklist_max_len", 0, 1)):
            if not low < getattr(self, name) <= high:
                raise ValueError(f"{name} = {getattr(self, name)} is outside ({low}, {high}]; give one inside")
        for name, low, high in (("exploration_min", 0, 1), ("round_threshold", 0, 100)):
            if not low <= getattr(self, name) <= high:
                raise ValueError(f"{name} = {getattr(self, name)} is outside [{low}, {high}]; give one inside")
        for name, low in (("round_penalty", 0), ("exploit_pool", 0), ("sample_window", 1), ("pacer_step", 1),
                          ("pacer_delta", 0), ("blacklist_rounds", 0), ("samples_cap", 1)):
            value = getattr(self, name)
            if value is not None and value < low:
                raise ValueError(f"{name} = {value} is below {low}; give at least {low}")

    def init(self, registry: Registry, rounds: int, clients_per_round: int) -> OortState:
        samples = registry.num_samples.astype(np.float64)
        return OortState(float(self.round_threshold),
                         samples=samples if self.samples_cap is None else np.minimum(samples, self.samples_cap),
                         cut_s=np.zeros(registry.n))

    # ---- what the server observes -------------------------------------------------------------------------
    def observe(self, state: OortState, round: int, now: float, outcomes: list[Outcome],
                history: History) -> OortState:
        aggregations, observed_round = state.aggregations, state.observed_round
        window_sum, window_count = list(state.window_sum), list(state.window_count)
        if round != observed_round:
            aggregations += 1
            observed_round = round
            window_sum = (window_sum + [0.0])[-2 * self.pacer_step:]
            window_count = (window_count + [0])[-2 * self.pacer_step:]
        exploiting, cut_s = list(state.exploiting), state.cut_s.copy()
        for o in outcomes:
            d = o.device
            if o.outcome in RECEIVED:
                cut_s[d] = 0.0
            elif o.outcome == "cut":
                cut_s[d] = o.ended_s - o.dispatched_s
            if d in exploiting:
                exploiting.remove(d)
                if "train_loss" in o.metrics:
                    window_sum[-1] += float(state.samples[d] * o.metrics.get("train_loss_sq", o.metrics["train_loss"]))
                    window_count[-1] += 1
        return replace(state, aggregations=aggregations, observed_round=observed_round, window_sum=window_sum,
                       window_count=window_count, exploiting=exploiting, cut_s=cut_s)

    # ---- the pieces of the rule ---------------------------------------------------------------------------
    def epsilon(self, state: OortState) -> float:
        """The exploration share of the next pick."""
        return max(self.exploration_factor * self.exploration_decay ** (state.aggregations + 1), self.exploration_min)

    def pace(self, state: OortState) -> OortState:
        """Every pacer_step rounds, move the threshold by how the exploited utility of the last window compares
        with the window before."""
        step = self.pacer_step
        if state.aggregations < 2 * step or state.aggregations % step or state.paced_at == state.aggregations:
            return state
        means = [s / c if c else 0.0 for s, c in zip(state.window_sum, state.window_count)]
        previous, current = sum(means[:step]), sum(means[step:])
        threshold = state.threshold
        if abs(current - previous) <= STALL * previous:
            threshold = min(100.0, threshold + self.pacer_delta)
        elif abs(current - previous) >= JUMP * previous:
            threshold = max(self.pacer_delta, threshold - self.pacer_delta)
        return replace(state, paced_at=state.aggregations, threshold=threshold)

    def durations(self, state: OortState, registry: Registry, history: History) -> np.ndarray:
        """t_i: the last measured task time, else the registered prediction; at least its last cut task's run."""
        measured = np.where(np.isnan(history.duration_s), registry.task_s, history.duration_s)
        return np.maximum(measured, state.cut_s)

    def preferred(self, state: OortState, durations: np.ndarray) -> float:
        """T: the threshold percentile of the durations, as the code indexes it; infinite at 100."""
        if state.threshold >= 100:
            return math.inf
        k = min(int(len(durations) * state.threshold / 100), len(durations) - 1)
        return float(np.partition(durations, k)[k])   # the sorted durations' k-th, without sorting them all

    def system_factor(self, durations: np.ndarray, preferred: float) -> np.ndarray:
        slow = durations > preferred
        factor = np.ones(len(durations))
        factor[slow] = (preferred / np.maximum(durations[slow], CLIP_FLOOR)) ** self.round_penalty
        return factor

    def blacklist(self, history: History) -> np.ndarray:
        """(n,) bool: the most-picked devices, picked more than blacklist_rounds times, at most int(share x N)."""
        black = np.zeros(history.n, dtype=bool)
        if self.blacklist_rounds is None:
            return black
        order = np.argsort(-history.selected, kind="stable")
        over = int(np.sum(history.selected > self.blacklist_rounds))
        black[order[:min(over, int(self.blacklist_max_len * history.n))]] = True
        return black

    def utilities(self, state: OortState, devices: np.ndarray, history: History) -> np.ndarray:
        """U_i of these devices, tried before; the mean of the known ones where a device never reported."""
        utility = state.samples[devices] * history.loss_sq[devices]
        known = ~np.isnan(utility)
        return np.where(known, utility, utility[known].mean() if known.any() else 1.0)

    def scores(self, state: OortState, devices: np.ndarray, round: int, history: History,
               factor: np.ndarray) -> np.ndarray:
        """The exploitation score of these devices, tried before: clipped, rescaled utility plus the temporal
        uncertainty, times the system factor."""
        utility = self.utilities(state, devices, history)
        k = min(int(len(utility) * self.clip_bound), len(utility) - 1)
        ordered = np.partition(utility, [0, k, len(utility) - 1])   # the sorted utilities' places 0, k, -1
        clip = ordered[k]
        low = ordered[0] * 0.999
        spread = max(ordered[-1] - low, CLIP_FLOOR)
        temporal = np.sqrt(0.1 * math.log(round) / history.last_selected[devices])
        return np.abs(((np.minimum(utility, clip) - low) / spread + temporal) * factor[devices])

    # ---- the pick -----------------------------------------------------------------------------------------
    def select(self, state: OortState, ctx: SelectionContext,
               rng: np.random.Generator) -> tuple[np.ndarray, OortState]:
        history = ctx.history
        state = self.pace(state)
        durations = self.durations(state, ctx.registry, history)
        preferred = self.preferred(state, durations)
        candidates = ctx.candidates
        if self.blacklist_rounds is not None:
            candidates = candidates[~self.blacklist(history)[candidates]]
        tried = history.selected[candidates] > 0
        explored, fresh = candidates[tried], candidates[~tried]
        factor = np.ones(history.n)  # the system factor of the candidates (the others are never read)
        factor[candidates] = self.system_factor(durations[candidates], preferred)
        k = min(ctx.n_select, len(candidates))
        share = k * self.epsilon(state)
        explore = int(share) + int(ctx.asynchronous and rng.random() < share - int(share))
        n_exploit = min(k - explore, len(explored))
        n_explore = min(len(fresh), k - n_exploit)
        n_exploit = min(k - n_explore, len(explored))   # exploitation takes what exploration cannot fill
        exploited = self.exploit(state, explored, n_exploit, ctx.round, history, factor, rng)
        explored_now = self.explore(state, fresh, n_explore, factor, rng)
        state = replace(state, exploiting=state.exploiting + exploited.tolist())
        return np.concatenate([exploited, explored_now]).astype(np.int64), state

    def exploit(self, state: OortState, explored: np.ndarray, n: int, round: int, history: History,
                factor: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        score = self.scores(state, explored, round, history, factor)
        m = min(n, len(score) - 1)
        cut = -np.partition(-score, m)[m] * self.cut_off_util   # the (m+1)-th highest score's share
        keep = min(len(score), max(int(np.sum(score >= cut)), int(self.exploit_pool * n) + 1))
        order = stable_order(-score, keep)
        return draw(explored[order], score[order], n, rng)

    def explore(self, state: OortState, fresh: np.ndarray, n: int, factor: np.ndarray,
                rng: np.random.Generator) -> np.ndarray:
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        weight = state.samples[fresh] * factor[fresh]
        order = stable_order(-weight, max(n, int(self.sample_window * n)))
        return draw(fresh[order], weight[order], n, rng)


def draw(devices: np.ndarray, weight: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n of the devices without replacement, each draw by weight (uniformly where fewer than n weigh anything)."""
    weighted = np.count_nonzero(weight) >= n
    return rng.choice(devices, size=n, replace=False, p=weight / weight.sum() if weighted else None)
