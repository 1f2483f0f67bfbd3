"""Uniform selection (the default): every candidate equally likely, as FedAvg (McMahan et al., AISTATS 2017)
draws C x N clients at random among those available.

Synchronous round: n_select devices without replacement among the candidates. Asynchronous dispatch: devices drawn
uniformly over the whole fleet and kept when usable and not yet picked (cheap while many are usable: no candidate
list at 100,000 devices), and, where REJECTION_DRAWS draws a slot were not enough, drawn among the listed
candidates left; the picks are then put in a random order and sorted, a draw that changes nothing but that the
asynchronous protocol has always taken, kept so its tables stay as they were.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from testbed.selection.base import SelectionContext, Selector, select_uniform

REJECTION_DRAWS = 32  # uniform draws per free slot before the candidates are listed outright


@dataclass
class Uniform(Selector):
    def select(self, ctx: SelectionContext, rng: np.random.Generator) -> np.ndarray:
        if not ctx.asynchronous:
            return select_uniform(ctx.candidates, ctx.n_select, rng)
        k, n = ctx.n_select, ctx.registry.n
        chosen: dict[int, None] = {}
        for _ in range(REJECTION_DRAWS * k):
            d = int(rng.integers(n))
            if d not in chosen and ctx.usable(d):
                chosen[d] = None
                if len(chosen) == k:
                    break
        if len(chosen) < k:
            pool = np.setdiff1d(ctx.candidates, np.fromiter(chosen, np.int64, len(chosen)), assume_unique=True)
            chosen |= dict.fromkeys(rng.choice(pool, min(k - len(chosen), len(pool)), replace=False).tolist())
        picked = np.fromiter(chosen, np.int64, len(chosen))
        return select_uniform(picked, len(picked), rng) if len(picked) else picked
