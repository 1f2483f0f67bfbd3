"""A participant selector of one's own: the devices that have trained least so far, ties broken at random.

A fairness baseline (every device gets its turn before any gets a second one), written against
testbed.selection.Selector: a frozen dataclass of its options; `select(state, ctx, rng)` gets the candidates and
what the server has observed (ctx.history), draws from the selection stream it is given, and returns its picks
with its state (it keeps none: the history holds all it needs, so the state stays None). Name it from a scenario as
`selection: {name: "least_trained:LeastTrained", options: {prefer_fast: true}}`.
"""
from dataclasses import dataclass

import numpy as np

from testbed.selection import SelectionContext, Selector


@dataclass(frozen=True)
class LeastTrained(Selector):
    prefer_fast: bool = False   # among devices with equal counts, the faster first (registry's predicted time)

    def select(self, state: None, ctx: SelectionContext, rng: np.random.Generator) -> tuple[np.ndarray, None]:
        candidates = ctx.candidates
        trained = ctx.history.arrived[candidates]
        tie = ctx.registry.task_s[candidates] if self.prefer_fast else rng.random(len(candidates))
        order = np.lexsort((tie, trained))   # by count, then by the tie-breaker
        return candidates[order[:ctx.n_select]], state
