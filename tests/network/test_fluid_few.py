"""fluid.solve without the links' loads (an asynchronous dispatch's solves): a few flows take fluid_few's loop in
Python floats, which must give the arrays' loop's every bit; more flows take the arrays' loop without logging
loads. Each answer is compared field by field with the same flows solved with loads (the arrays' loop)."""
import dataclasses

import numpy as np
import pytest

from testbed.network import fluid, fluid_few

MB = 1e6


def tied_flows(rng, n, n_links):
    """n flows through up to 3 of n_links links, with the ties a dispatch makes: equal starts, sizes, caps and
    capacities (identical phones in identical cells), some flows idle, some cut."""
    start = rng.choice([0.0, 0.5, 1.0, 1.5], n) + rng.random(n) * rng.integers(0, 2)
    size = rng.choice([0.0, 1.0, 2.0, 3.3], n) * MB * rng.integers(0, 3, n) + rng.random(n) * 0.1 * MB
    cap = rng.choice([1.0, 2.0, 2.5, 8.0], n) * MB * (1 + rng.random(n) * rng.integers(0, 2))
    capacity = rng.choice([2.0, 4.0, 8.0, np.inf], n_links) * MB * (1 + rng.random(n_links) * rng.integers(0, 2))
    width = int(rng.integers(1, min(n_links, 3) + 1))
    links = np.full((n, width), -1)
    for i in range(n):
        k = int(rng.integers(0, width + 1))
        links[i, :k] = rng.permutation(n_links)[:k]
    stop = np.where(rng.random(n) < 0.3, start + rng.random(n) * 2, np.inf)
    return start, size, cap, links, capacity, stop


def assert_same_flows(without, with_loads):
    for field in dataclasses.fields(without):
        if field.name in ("event_s", "load_Bps"):
            continue
        a, b = getattr(without, field.name), getattr(with_loads, field.name)
        assert a.dtype == b.dtype and a.shape == b.shape, field.name
        np.testing.assert_array_equal(a, b, err_msg=field.name)


@pytest.mark.parametrize("seed", range(4))
def test_a_few_flows_solved_in_python_floats_are_the_arrays_solve_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    for _ in range(100):
        flows = tied_flows(rng, int(rng.integers(1, fluid_few.FEW_FLOWS + 1)), int(rng.integers(1, 6)))
        assert_same_flows(fluid.solve(*flows, loads=False), fluid.solve(*flows))


def test_more_flows_solved_without_loads_are_the_same_flows_with_no_loads():
    rng = np.random.default_rng(7)
    flows = tied_flows(rng, 3 * fluid_few.FEW_FLOWS, 4)
    without = fluid.solve(*flows, loads=False)
    assert_same_flows(without, fluid.solve(*flows))
    assert without.event_s.shape == (0,) and without.load_Bps.shape == (0, 4)


def test_the_hand_computed_cell_and_server_case_through_the_python_loop():
    # tests/network/test_fluid.py's ISSUE_CASE: A and B share a 10 MB/s cell behind a 12 MB/s server, C alone in
    # a cell of its own; A ends at 4, B at 5.5, C at 6; A and B waited 1.25 s each, C none
    flows = fluid.solve([0.0, 1.0, 2.0], [22 * MB, 26 * MB, 12 * MB], [8 * MB, 8 * MB, 3 * MB],
                        [[0, 1], [0, 1], [2, 1]], [10 * MB, 12 * MB, np.inf], loads=False)
    np.testing.assert_allclose(flows.end_s, [4.0, 5.5, 6.0], rtol=1e-12)
    np.testing.assert_allclose(flows.waited_s, [1.25, 1.25, 0.0], atol=1e-9)
    assert flows.done.all() and flows.event_s.shape == (0,)

