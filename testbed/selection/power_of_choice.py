"""Power-of-choice selection (Cho, Wang, Joshi, "Towards Understanding Biased Client Selection in Federated
Learning", AISTATS 2022; arXiv 2010.01243, "Client Selection in Federated Learning: Convergence Analysis and
Power-of-Choice Selection Strategies", 2020).

The rule (pow-d, the paper's Algorithm 1):
1. draw a candidate set of d devices among those usable, without replacement, each draw with probability
   proportional to the device's number of training samples (p_k = |B_k| / sum |B|);
2. obtain each candidate's local loss F_k(w) on the current global model w;
3. keep the n_select candidates with the highest loss (ties: in the order drawn).
d = n_select is selection in proportion to data size; a larger d biases toward high loss: faster convergence,
some error floor (the paper's trade-off).

Where the loss comes from (option `loss`):
- "probe" (pow-d): each candidate computes its loss on the current model at the round's start, charged on the
  clock (SelectionContext.probe, testbed/protocols/probe.py: it downloads the model, runs a forward pass over its
  training samples, uploads the loss; the tasks go out when the last answer arrives). A candidate that went
  offline before answering has no loss and is not picked. Synchronous rounds only: with protocol kind async
  there is no round start to probe at, and the scenario is refused at validation (use loss: reported).
- "reported" (rpow-d, the paper's computation- and communication-free variant): the server ranks the candidates
  by the last training loss each reported with an update it used (History.loss: the mean over its local
  iterations), with no probe; a device that never reported one ranks first (the paper gives unseen clients the
  highest priority so each is tried once). Works for asynchronous dispatch too.

Options and defaults: d (None: 2 x n_select; the paper sweeps d over multiples of m and has no single default,
and FLGo's default d = all clients is the costliest probe: 2m is our choice, the smallest such multiple); a d
below n_select is taken as n_select, and d is capped at the number of candidates. loss: "probe".
Confirmed with `search`: the pow-d steps against FLGo's public implementation (flgo/algorithm/powerofchoice.py:
candidates drawn with p proportional to training-set size, replace=False; the top m by the loss each reports on
the current model) and FLGo's tutorial of it. The rpow-d details (last reported training loss, unseen clients
first) and the experiments' d are from memory of the paper: search found its abstract only.

Deviations: the probe's loss is the mean cross-entropy over all the device's training samples (the paper's
cpow-d estimates it on a mini-batch); a selected device downloads the model again with its task (see
protocols/sync.py). Among equal losses the draw order decides.

It sees only what a real server knows: the registry's declared sample counts, the history's reported losses,
the candidates, and the losses its probe measures; never the simulator's tiers or availability.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from testbed.selection.base import SelectionContext, Selector

LOSS_SOURCES = ("probe", "reported")


@dataclass(frozen=True)
class PowerOfChoice(Selector):
    d: int | None = None
    loss: Literal["probe", "reported"] = "probe"

    def __post_init__(self):
        if self.d is not None and self.d < 1:
            raise ValueError(f"d must be at least 1 (got {self.d}); set d to the candidate set's size, e.g. "
                             "2 x the devices a round selects")
        if self.loss not in LOSS_SOURCES:
            raise ValueError(f"loss must be one of {', '.join(LOSS_SOURCES)} (got {self.loss!r})")

    def async_refusal(self) -> str | None:
        if self.loss != "probe":
            return None
        return ("selection.options.loss: power_of_choice's probe asks candidates for their loss at a synchronous "
                "round's start, and async dispatch has none; use loss: reported, or protocol kind sync")

    def select(self, state: None, ctx: SelectionContext, rng: np.random.Generator) -> tuple[np.ndarray, None]:
        """pow-d's pick; it keeps no state (None): the losses are the probe's or the history's."""
        candidates = ctx.candidates
        if not len(candidates) or ctx.n_select < 1:
            return np.empty(0, dtype=np.int64), state
        drawn = self.candidate_set(candidates, ctx.registry.num_samples, ctx.n_select, rng)
        losses = self.losses(ctx, drawn)
        # highest loss first, ties in the order drawn; never-reported first (rpow-d); no answer never
        key = np.where(np.isnan(losses), np.inf if self.loss == "reported" else np.nan, losses)
        order = np.argsort(-key, kind="stable")   # NaN (no answer) sorts last
        keep = order[~np.isnan(key[order])][:ctx.n_select]
        return np.sort(drawn[keep]), state

    def candidate_set(self, candidates: np.ndarray, num_samples: np.ndarray, n_select: int,
                      rng: np.random.Generator) -> np.ndarray:
        """d candidates without replacement, each draw with probability proportional to its samples, in the
        order drawn."""
        d = min(max(2 * n_select if self.d is None else self.d, n_select), len(candidates))
        weights = num_samples[candidates].astype(np.float64)
        return rng.choice(candidates, size=d, replace=False, p=weights / weights.sum())

    def losses(self, ctx: SelectionContext, drawn: np.ndarray) -> np.ndarray:
        """Each drawn candidate's loss on the current model: probed (NaN: no answer), or last reported (NaN:
        never)."""
        if self.loss == "reported":
            return ctx.history.loss[drawn]
        if ctx.probe is None:
            raise RuntimeError("power_of_choice: loss 'probe' needs a synchronous round's probe")
        return np.asarray(ctx.probe(drawn), dtype=np.float64)
