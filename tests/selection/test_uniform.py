"""Uniform asynchronous selection by rejection (testbed/selection/uniform.py): whether it draws one at a time (a
few slots) or in batches (many), it keeps the devices and leaves the selection stream exactly where drawing one
device at a time, by hand, does."""
import numpy as np
import pytest

from testbed.selection.base import SelectionContext, select_uniform
from testbed.selection.uniform import REJECTION_DRAWS, SINGLE_DRAW_SLOTS, Uniform, by_rejection


class Fleet:
    n = 50


def by_hand(seed: int, k: int, draws: int, usable) -> tuple[list[int], dict]:
    rng, chosen = np.random.default_rng(seed), []
    while len(chosen) < k and draws:
        d, draws = int(rng.integers(Fleet.n)), draws - 1
        if d not in chosen and usable(d):
            chosen.append(d)
    return chosen, rng.bit_generator.state


@pytest.mark.parametrize("k", [1, 3, SINGLE_DRAW_SLOTS, SINGLE_DRAW_SLOTS + 1, 20])
@pytest.mark.parametrize("draws", [2, 1000])
def test_rejection_keeps_what_single_draws_keep_and_leaves_the_stream_there(k, draws):
    usable = np.random.default_rng(7).random(Fleet.n) < 0.4   # 40% of the fleet usable
    for seed in range(20):
        ctx = SelectionContext(1, 0.0, k, Fleet, None, lambda: np.flatnonzero(usable), lambda d: bool(usable[d]),
                               asynchronous=True, usable_each=lambda ids: usable[ids])
        rng = np.random.default_rng(seed)
        chosen = list(by_rejection(ctx, rng, k, draws))
        expected, state = by_hand(seed, k, draws, lambda d: bool(usable[d]))
        assert chosen == expected and rng.bit_generator.state == state, (seed, k, draws)
        assert len(chosen) == min(k, usable.sum()) if draws == 1000 else len(chosen) <= draws


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_dispatch_picks_as_the_shuffled_sort_did_and_a_single_pick_draws_nothing_more(k):
    # select_uniform skips the shuffle of a single candidate (numpy's choice of one among one draws nothing): a
    # dispatch's picks and the stream after them are those of the kept devices shuffled and sorted, as numpy does
    usable = np.random.default_rng(7).random(Fleet.n) < 0.4
    for seed in range(10):
        ctx = SelectionContext(1, 0.0, k, Fleet, None, lambda: np.flatnonzero(usable), lambda d: bool(usable[d]),
                               asynchronous=True, usable_each=lambda ids: usable[ids])
        rng, by_steps = np.random.default_rng(seed), np.random.default_rng(seed)
        picked = Uniform().pick(ctx, rng)
        kept = np.fromiter(by_rejection(ctx, by_steps, k, REJECTION_DRAWS * k), np.int64)
        shuffled = np.sort(by_steps.choice(kept, k, replace=False))
        assert len(kept) == k and picked.tolist() == shuffled.tolist() == sorted(kept.tolist())
        assert rng.bit_generator.state == by_steps.bit_generator.state, (seed, k)


@pytest.mark.parametrize("online", [[17], np.array([17]), np.array([], dtype=np.int64), [], np.array([9, 4])])
@pytest.mark.parametrize("n_select", [0, 1, 3])
def test_select_uniform_is_numpys_shuffled_sort_with_one_candidate_or_none(online, n_select):
    rng, by_numpy = np.random.default_rng(5), np.random.default_rng(5)
    rng.integers(9), by_numpy.integers(9)   # a stream with a half-used word, as a run's
    picked = select_uniform(online, n_select, rng)
    expected = np.sort(by_numpy.choice(online, size=min(n_select, len(online)), replace=False))
    assert picked.tolist() == expected.tolist() and picked.dtype == expected.dtype
    assert rng.bit_generator.state == by_numpy.bit_generator.state
