"""FedCS: deadline-aware greedy selection (Nishio and Yonetani, "Client Selection for Federated Learning with
Heterogeneous Resources in Mobile Edge", IEEE ICC 2019, arXiv 1804.08333).

The rule. Resource request: the server asks ceil(request_fraction x candidates) random candidates for their
resource information. Client selection (the paper's Algorithm 2): from those, it estimates each one's time to
receive the model (T^d), to update it (T^UD) and to upload it (T^UL), and builds the set S greedily. Uploads are
scheduled one after another on the shared channel, in S's order, each starting when the channel is free and its
update done: with S = (k_1, ..., k_i), the elapsed time after distribution is
    Θ_0 = 0,  Θ_i = Θ_{i-1} + T^UL_{k_i} + max(0, T^UD_{k_i} - Θ_{i-1}),
and the round takes T^d_S + Θ_|S|, where T^d_S, the model's distribution to all of S, is bounded by its slowest
receiver. Each step takes the requested client x whose addition increases the elapsed time least
(x = argmax_k 1 / (T^UL_k + max(0, T^UD_k - Θ))), removes it from the requested, and adds it to S if the round
still fits the deadline, T^d_{S+x} + Θ' <= T_round; until none is left (or, here, S holds n_select): the most
clients whose updates fit the deadline.

Estimates from the registry (what each device declared): T^d_k = latency_s + bytes_down / down_Bps,
T^UD_k = train_flops / flops_per_s (its samples' training work over its nominal FLOP/s),
T^UL_k = latency_s + bytes_up / up_Bps (Registry.phases_s; their sum is registry.task_s).
These are the paper's estimates from what a device declares, and stay so under compute: latency: only the clock
that plays the round changes (testbed/latency/clock.py), so a deadline planned on FLOPs may be missed.

Defaults and where they come from: request_fraction 0.1, the fraction C of clients the paper's experiments
ask (as we read the paper; the searched public material did not show the figure: SelecEval's FedCS, which
pre-samples a fraction before the same greedy, uses 0.2 in its example); T_round (deadline_s) the round's
deadline, round.deadline_s, where no deadline_s option is given. The greedy step and the round-time test are
as the paper's Algorithm 2 and as SelecEval's seleceval/selection/fedcs.py (jsincn/SelecEval:
argmax 1 / (T^d_S + T^UL_k + max(0, T^UD_k - Θ)), the T^d_S term being the same for every k).

It sees only what a real server knows: the registry, the candidates and the deadline; never the simulator's
ground truth (no fleet, no capability tiers, no availability model).

Deviations and honest limits:
- The registry gives nominal figures. A device whose capability tier this round is below its profile's nominal
  FLOP/s, or whose rates fluctuate, is slower than estimated and may miss the deadline: FedCS's own failure
  mode (it trusts what clients report), left visible here rather than corrected from measurements.
- The testbed's links are the devices' own, not one shared channel: the paper's one-after-another uploads make
  the estimate conservative (FedCS picks fewer than would fit).
- The paper's T_cs (the selection step itself) and T_agg (aggregation) are not charged against T_round: the
  testbed's deadline runs from dispatch to arrival.
- Only the devices usable now (ctx.candidates) can answer the request.
ASYNC is False: the greedy schedules a synchronous round's uploads against its deadline.
"""
from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from testbed.selection.base import SelectionContext, Selector
from testbed.selection.ranking import stable_order


def greedy_schedule(requested: np.ndarray, down_s: np.ndarray, update_s: np.ndarray, up_s: np.ndarray,
                    deadline_s: float, most: int) -> list[int]:
    """The paper's Algorithm 2 over the requested ids (arrays indexed by id): S in the order added (ties: the
    requested order).

    Each step's argmin without scanning every requested client: a client's growth is up_k once its update is
    done by theta (update_k <= theta), else up_k + update_k - theta, whose order among the not-yet-done does not
    move with theta. So a heap holds the done (by up_k) and a fixed order the not done (by up_k + update_k), clients pass from the
    second to the first as theta grows, and each step compares the exact growths of the two heaps' tops: O(log)
    a step, where a scan is O(requested) (6 s a selection at 100,000 devices, K = 1,000). Once every update is
    done by theta, the steps take the rest in order of (up_k, position), with no heap (`_all_done`)."""
    requested = np.asarray(requested, dtype=np.int64)
    down_a, update_a, up_a = (np.asarray(a, dtype=np.float64)[requested] for a in (down_s, update_s, up_s))
    # the requested clients' figures as Python floats, by position: a step touches a few, one at a time
    down, update, up = down_a.tolist(), update_a.tolist(), up_a.tolist()
    by_update = stable_order(update_a)                           # positions, as theta passes their update
    passes = update_a[by_update].tolist()                        # their updates, ascending
    by_update = by_update.tolist()
    done: list[tuple[float, int]] = []                           # a heap of (up_k, position)
    # the not yet done by (up_k + update_k, position): the order never moves, so a pointer pops the least
    waiting, w = stable_order(up_a + update_a).tolist(), 0
    moved, taken = [False] * len(requested), [False] * len(requested)
    chosen, theta, slowest_down, passed = [], 0.0, 0.0, 0
    while len(chosen) < most:
        now_passed = bisect.bisect_right(passes, theta, passed)
        if now_passed == len(by_update):   # every update is done: the rest in (up_k, position) order
            rest = np.flatnonzero(~np.array(taken, dtype=bool))
            rest = rest[stable_order(up_a[rest])].tolist()
            chosen += [int(requested[i]) for i in
                       _all_done(rest, down, up, theta, slowest_down, deadline_s, most - len(chosen))]
            break
        for i in by_update[passed:now_passed]:
            if not taken[i]:
                moved[i] = True
                heapq.heappush(done, (up[i], i))
        passed = now_passed
        while w < len(waiting) and (moved[waiting[w]] or taken[waiting[w]]):
            w += 1
        tops = ([done[0][1]] if done else []) + ([waiting[w]] if w < len(waiting) else [])
        if not tops:
            break
        growth = {i: up[i] + max(0.0, update[i] - theta) for i in tops}
        i = min(tops, key=lambda j: (growth[j], j))
        if moved[i]:
            heapq.heappop(done)
        else:
            w += 1
        taken[i] = True
        theta_x = theta + growth[i]
        if slowest_down + theta_x > deadline_s:  # the least growth left does not fit: no later client can
            break
        if max(slowest_down, down[i]) + theta_x <= deadline_s:
            chosen.append(int(requested[i]))
            theta, slowest_down = theta_x, max(slowest_down, down[i])
    return chosen


def _all_done(order: list[int], down: list[float], up: list[float], theta: float, slowest_down: float,
              deadline_s: float, most: int) -> list[int]:
    """The greedy's steps once every update is done by theta: each growth is up_k, so the steps take the
    clients in `order` (by up_k, then position), with the same tests; the positions added."""
    chosen = []
    for i in order:
        if len(chosen) == most:
            break
        theta_x = theta + up[i]
        if slowest_down + theta_x > deadline_s:
            break
        if max(slowest_down, down[i]) + theta_x <= deadline_s:
            chosen.append(i)
            theta, slowest_down = theta_x, max(slowest_down, down[i])
    return chosen


@dataclass(frozen=True)
class FedCS(Selector):
    request_fraction: float = 0.1      # C: the share of candidates asked for their resources
    deadline_s: float | None = None    # T_round; default the round's deadline (round.deadline_s)

    ASYNC: ClassVar[bool] = False

    def __post_init__(self):
        if not 0 < self.request_fraction <= 1:
            raise ValueError(f"request_fraction must be in (0, 1] (got {self.request_fraction}); the paper asks 0.1")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise ValueError(f"deadline_s must be positive seconds (got {self.deadline_s}), or left out for "
                             "round.deadline_s")

    def needs_deadline(self) -> bool:
        return self.deadline_s is None

    def select(self, state: None, ctx: SelectionContext, rng: np.random.Generator) -> tuple[np.ndarray, None]:
        """The greedy's set; FedCS keeps no state (None)."""
        deadline = self.deadline_s if self.deadline_s is not None else ctx.deadline_s
        candidates = ctx.candidates
        asked = math.ceil(self.request_fraction * len(candidates))
        requested = np.sort(rng.choice(candidates, size=asked, replace=False))
        down_s, update_s, up_s = ctx.registry.phases_s(requested)
        positions = greedy_schedule(np.arange(asked), down_s, update_s, up_s, deadline, ctx.n_select)
        return np.sort(requested[np.array(positions, dtype=np.int64)]), state
