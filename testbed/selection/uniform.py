"""Uniform selection (the default): every candidate equally likely, as FedAvg (McMahan et al., AISTATS 2017)
draws C x N clients at random among those available.

Synchronous round: n_select devices without replacement among the candidates. Asynchronous dispatch: devices drawn
uniformly over the whole fleet and kept when usable and not yet picked (cheap while many are usable: no candidate
list at 100,000 devices), and, where REJECTION_DRAWS draws a slot were not enough, drawn among the listed
candidates left; the picks are then put in a random order and sorted, a draw that changes nothing but moves
the stream (the committed asynchronous tables were made with it, and a seed must keep giving them). For a few
free slots the draws are single (each costs a quarter of a batch's call); for more they are made in batches
(numpy's batch of integers is its sequence of single draws) and checked at once, the stream then put back to
just after the last draw used, so it reads as the one draw at a time it describes (tests/selection/test_uniform.py
checks both against it).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from testbed.selection.base import SelectionContext, Selector, select_uniform

REJECTION_DRAWS = 32  # uniform draws per free slot before the candidates are listed outright
SINGLE_DRAW_SLOTS = 8  # up to this many free slots, draws are single: numpy's batch call costs ~4 of them


@dataclass(frozen=True)
class Uniform(Selector):
    """Keeps no state (None)."""

    def select(self, state: None, ctx: SelectionContext, rng: np.random.Generator) -> tuple[np.ndarray, None]:
        return self.pick(ctx, rng), state

    def pick(self, ctx: SelectionContext, rng: np.random.Generator) -> np.ndarray:
        if not ctx.asynchronous:
            return select_uniform(ctx.candidates, ctx.n_select, rng)
        k = ctx.n_select
        chosen = by_rejection(ctx, rng, k, REJECTION_DRAWS * k)
        if len(chosen) < k:
            pool = np.setdiff1d(ctx.candidates, np.fromiter(chosen, np.int64, len(chosen)), assume_unique=True)
            chosen |= dict.fromkeys(rng.choice(pool, min(k - len(chosen), len(pool)), replace=False).tolist())
        picked = np.fromiter(chosen, np.int64, len(chosen))
        return select_uniform(picked, len(picked), rng) if len(picked) else picked


def by_rejection(ctx: SelectionContext, rng: np.random.Generator, k: int, draws: int) -> dict[int, None]:
    """Devices drawn uniformly over the fleet one at a time, each kept when usable and not kept yet, until k are
    kept or `draws` draws are spent; in the order kept."""
    n, chosen = ctx.registry.n, {}
    if k <= SINGLE_DRAW_SLOTS:  # a handful of slots (an asynchronous dispatch's)
        while len(chosen) < k and draws > 0:
            d, draws = int(rng.integers(n)), draws - 1
            if d not in chosen and ctx.usable(d):
                chosen[d] = None
        return chosen
    while len(chosen) < k and draws > 0:
        size = min(draws, 2 * (k - len(chosen)) + 2)   # about twice the draws needed where half the fleet is usable
        before = rng.bit_generator.state
        batch = rng.integers(n, size=size)
        used = size
        for i, (d, usable) in enumerate(zip(batch.tolist(), ctx.usable_each(batch).tolist())):
            if usable and d not in chosen:
                chosen[d] = None
                if len(chosen) == k:
                    used = i + 1
                    break
        if used < size:  # the stream as if only the draws used were made
            rng.bit_generator.state = before
            rng.integers(n, size=used)
        draws -= used
    return chosen
