"""The shared-network solver (testbed.network): end instants computed by hand, max-min fairness against the
bottleneck condition and a naive level-by-level reference, bytes conservation, cuts, and re-solving from an
instant. Speed is measured in benchmarks/network_fluid.py, never here."""
import numpy as np
import pytest

from testbed.network import max_min_rates, solve
from testbed.network.uncongested import first_congestion

MB = 1e6
NO_LINKS = np.zeros((1, 0), dtype=int)


def test_one_flow_alone_ends_at_bytes_over_the_smaller_of_cap_and_capacity():
    # cap 2 MB/s below the link's 5 MB/s: 0.3 + 7.1 / 2 = 3.85, bit for bit as on a private link
    flows = solve([0.3], [7.1 * MB], [2 * MB], [[0]], [5 * MB])
    assert flows.end_s[0] == 0.3 + 7.1 * MB / (2 * MB)
    assert flows.end_s[0] == pytest.approx(3.85, abs=1e-12)
    assert flows.done[0] and flows.moved[0] == 7.1 * MB and flows.waited_s[0] == 0.0
    # link of 1.5 MB/s below the cap of 2 MB/s: 0.3 + 7.1 / 1.5 = 5.03333...; it waited 4.7333 - 3.55 = 1.18333
    flows = solve([0.3], [7.1 * MB], [2 * MB], [[0]], [1.5 * MB])
    assert flows.end_s[0] == pytest.approx(0.3 + 7.1 / 1.5, abs=1e-9)
    assert flows.waited_s[0] == pytest.approx(7.1 / 1.5 - 7.1 / 2, abs=1e-9)


# The issue's case: A and B in one cell (link 0, 10 MB/s) behind the server (link 1, 12 MB/s); C in a cell of its
# own (link 2, inf: never binds) behind the same server. Caps A 8, B 8, C 3 MB/s; bytes A 22, B 26, C 12 MB.
#   [0, 1)   A alone: min(8, 10, 12) = 8 (its own cap).                           A has 8 by t = 1
#   [1, 2)   B joins: the cell binds, 10 / 2 = 5 each (server load 10 < 12).     A 13, B 5 by t = 2
#   [2, 4)   C joins: the server binds: C at its cap 3 (below the share), A and B (12 - 3) / 2 = 4.5 each;
#            the cell carries 9 < 10.                                             A 13 + 9 = 22: ends at 4; B 14
#   [4, 5.5) A gone: B min(8, 10, 12 - 3) = 8 (its cap), C 3.                    B 14 + 12 = 26: ends at 5.5
#   [5.5, 6) C alone at 3.                                                        C 4 x 3 = 12: ends at 6
# Waited: A 4 - 22 / 8 = 1.25, B 4.5 - 26 / 8 = 1.25, C 0 (never below its cap).
ISSUE_CASE = dict(start_s=[0.0, 1.0, 2.0], bytes_=[22 * MB, 26 * MB, 12 * MB], cap_Bps=[8 * MB, 8 * MB, 3 * MB],
                  links=[[0, 1], [0, 1], [2, 1]], capacity_Bps=[10 * MB, 12 * MB, np.inf])


def test_three_flows_through_a_cell_and_the_server_end_as_computed_by_hand():
    flows = solve(**ISSUE_CASE)
    np.testing.assert_allclose(flows.end_s, [4.0, 5.5, 6.0], rtol=0, atol=1e-9)
    assert flows.end_s[2] == 2.0 + 12 * MB / (3 * MB)            # C never ran below its cap: exact
    assert flows.done.all()
    np.testing.assert_array_equal(flows.moved, [22 * MB, 26 * MB, 12 * MB])
    np.testing.assert_allclose(flows.waited_s, [1.25, 1.25, 0.0], rtol=0, atol=1e-9)
    assert flows.waited_s[2] == 0.0
    np.testing.assert_array_equal(flows.private_s, [22 / 8, 26 / 8, 4.0])
    # by instant: A had 8 + 5 x 0.5 = 10.5 MB at 1.5; B 5 + 4.5 x 1 = 9.5 MB at 3
    assert flows.moved_by(0, 1.5) == pytest.approx(10.5 * MB, rel=1e-12)
    assert flows.moved_by(1, 3.0) == pytest.approx(9.5 * MB, rel=1e-12)
    np.testing.assert_allclose(flows.moved_by(1, [0.0, 1.0, 2.0, 4.0, 5.5, 9.0]) / MB, [0, 0, 5, 14, 26, 26],
                               rtol=1e-12)
    np.testing.assert_allclose(flows.moved_at(3.0) / MB, [17.5, 9.5, 3.0], rtol=1e-12)


def test_link_utilisation_is_a_step_function_of_the_event_instants():
    flows = solve(**ISSUE_CASE)
    times, cell = flows.utilisation(0)
    _, server = flows.utilisation(1)
    np.testing.assert_allclose(times, [0, 1, 2, 4, 5.5, 6], atol=1e-9)
    np.testing.assert_allclose(cell / MB, [8, 10, 9, 8, 0, 0], atol=1e-9)       # A; A+B; 4.5+4.5; B; -
    np.testing.assert_allclose(server / MB, [8, 10, 12, 11, 3, 0], atol=1e-9)   # + C's 3 from t = 2


def test_flows_starting_together_share_from_that_instant():
    # two flows of 10 MB, caps 8, start at 1 in a 10 MB/s cell: 5 each from 1, both end at 1 + 10 / 5 = 3
    flows = solve([1.0, 1.0], [10 * MB, 10 * MB], [8 * MB, 8 * MB], [[0], [0]], [10 * MB])
    np.testing.assert_allclose(flows.end_s, [3.0, 3.0], atol=1e-9)
    assert len(flows.event_s) == 2                               # one event for both starts, one for both ends
    # C starts at 1.8 as A (4 MB) finishes: A and B ran at 5 each from 1, A ends at 1 + 4 / 5 = 1.8; then B and C
    # share at 5 each: C (2 MB) ends at 1.8 + 2 / 5 = 2.2; B had 4 + 2 = 6 MB by then, its last 4 at its cap 8:
    # 2.2 + 4 / 8 = 2.7
    flows = solve([1.0, 1.0, 1.8], [4 * MB, 10 * MB, 2 * MB], [8 * MB] * 3, [[0], [0], [0]], [10 * MB])
    np.testing.assert_allclose(flows.end_s, [1.8, 2.7, 2.2], atol=1e-9)


def random_network(rng, n, n_links, width=3, spread_s=5.0):
    """n flows, each through 0 to `width` distinct links of n_links with random capacities (some inf)."""
    capacity = rng.uniform(1.0, 20.0, n_links) * MB
    capacity[rng.random(n_links) < 0.15] = np.inf
    links = np.full((n, width), -1)
    for i in range(n):
        chosen = rng.choice(n_links, rng.integers(0, min(width, n_links) + 1), replace=False)
        links[i, rng.permutation(width)[:len(chosen)]] = chosen      # padding anywhere in the row
    start = np.round(rng.uniform(0.0, spread_s, n), 1)               # rounded: some start together
    return start, rng.uniform(0.5, 20.0, n) * MB, rng.uniform(0.5, 10.0, n) * MB, links, capacity


def random_network_with_stops(seed, n, n_links):
    """random_network, and a fifth of the flows cut within 4 s of their start."""
    rng = np.random.default_rng(seed)
    start, size, cap, links, capacity = random_network(rng, n, n_links)
    return start, size, cap, links, capacity, np.where(rng.random(n) < 0.2, start + rng.uniform(0, 4, n), np.inf)


def naive_max_min(cap, links, capacity):
    """Progressive filling one level at a time, in plain Python: every free flow rises to the next level at
    which a flow reaches its cap or a link fills; those flows are fixed there."""
    rate, free, rest = [0.0] * len(cap), set(range(len(cap))), list(capacity)
    on = [[l for l in row if l >= 0] for row in links]
    while free:
        shares = [rest[l] / sum(1 for i in free if l in on[i]) for l in range(len(rest))
                  if any(l in on[i] for i in free)]
        level = min([cap[i] for i in free] + shares)
        full = {l for l in range(len(rest)) if any(l in on[i] for i in free)
                and rest[l] / sum(1 for i in free if l in on[i]) <= level * (1 + 1e-12)}
        fixed = {i for i in free if cap[i] <= level * (1 + 1e-12) or full & set(on[i])}
        for i in fixed:
            rate[i] = level
            for l in on[i]:
                rest[l] -= level
        free -= fixed
    return np.array(rate)


@pytest.mark.parametrize("seed", range(40))
def test_rates_are_max_min_fair(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 25))
    _, _, cap, links, capacity = random_network(rng, n, int(rng.integers(1, 6)))
    cap[rng.random(n) < 0.3] = cap[0]                                # ties between caps
    rate = max_min_rates(cap, links, capacity)
    np.testing.assert_allclose(rate, naive_max_min(cap, links, capacity), rtol=1e-9)
    # the bottleneck condition: within caps and capacities, and each flow at its cap or on a full link where no
    # flow has a larger rate
    assert (rate > 0).all() and (rate <= cap).all()
    load = np.array([rate[(links == l).any(axis=1)].sum() for l in range(len(capacity))])
    assert (load <= capacity * (1 + 1e-12)).all()
    for i in range(n):
        bottlenecked = [l for l in links[i][links[i] >= 0] if load[l] >= capacity[l] * (1 - 1e-12)
                        and rate[i] >= rate[(links == l).any(axis=1)].max() * (1 - 1e-12)]
        assert rate[i] == cap[i] or bottlenecked


def segments_moved(flows, i):
    """Bytes flow i moved, summed segment by segment from its breakpoints to its end."""
    lo, hi = flows.breaks[i], flows.breaks[i + 1]
    edges = np.append(flows.break_s[lo:hi], flows.end_s[i])
    return float(np.sum(flows.break_Bps[lo:hi] * np.diff(edges)))


@pytest.mark.parametrize("seed", range(10))
def test_bytes_are_conserved_and_the_rates_are_max_min_fair_between_events(seed):
    start, size, cap, links, capacity, stop = random_network_with_stops(100 + seed, 60, 6)
    flows = solve(start, size, cap, links, capacity, stop)
    for i in range(60):
        assert segments_moved(flows, i) == pytest.approx(flows.moved[i], rel=1e-6)
        assert flows.moved[i] == (size[i] if flows.done[i] else flows.moved[i])
        assert flows.moved_by(i, flows.end_s[i]) == pytest.approx(flows.moved[i], rel=1e-9)
    assert (flows.end_s <= np.maximum(stop, start)).all()
    np.testing.assert_array_equal(flows.end_s[~flows.done], np.maximum(stop, start)[~flows.done])   # cut there
    assert (flows.moved[~flows.done] < size[~flows.done]).all()
    assert (flows.waited_s >= -1e-9).all()
    # between events, the flows in flight move at the naive max-min rates of that set
    for t0, t1 in zip(flows.event_s[:-1], flows.event_s[1:]):
        mid = (t0 + t1) / 2
        on = np.flatnonzero((flows.start_s <= mid) & (mid < flows.end_s))
        eps = (t1 - t0) / 4
        speed = (flows.moved_at(mid + eps) - flows.moved_at(mid - eps))[on] / (2 * eps)
        np.testing.assert_allclose(speed, naive_max_min(cap[on], links[on], capacity), rtol=1e-6)
        np.testing.assert_allclose(flows.load_Bps[np.searchsorted(flows.event_s, mid) - 1],
                                   [speed[(links[on] == l).any(axis=1)].sum() for l in range(6)], rtol=1e-6)


def test_flows_whose_caps_never_reach_a_links_share_end_exactly_as_on_private_links():
    # 200 flows through 5 links whose capacities exceed the sum of their flows' caps: no link ever binds
    rng = np.random.default_rng(7)
    start, size, cap, links, _ = random_network(rng, 200, 5)
    capacity = np.array([cap[(links == l).any(axis=1)].sum() * 1.01 for l in range(5)])
    flows = solve(start, size, cap, links, capacity)
    np.testing.assert_array_equal(flows.end_s, start + size / cap)
    np.testing.assert_array_equal(flows.waited_s, np.zeros(200))
    # a slow flow (cap 1 MB/s) in a cell where fast flows come and go and bind: 4 at 8 MB/s share 20 MB/s at 5
    # each (the cell's (20 - 1) / 4 = 4.75 > 1 while all are in), so its rate stays 1 and it ends bit for bit
    start = [0.3, 0.0, 0.5, 1.0, 1.7]
    size = [7.3 * MB, 9 * MB, 12 * MB, 3 * MB, 20 * MB]
    flows = solve(start, size, [1 * MB] + [8 * MB] * 4, [[0]] * 5, [20 * MB])
    assert flows.end_s[0] == 0.3 + 7.3 * MB / (1 * MB) and flows.waited_s[0] == 0.0
    assert (flows.waited_s[1:] > 0).any()


def test_flows_with_no_shared_links_or_infinite_links_end_at_start_plus_bytes_over_cap():
    rng = np.random.default_rng(3)
    start, size, cap = rng.uniform(0, 9, 50), rng.uniform(0, 30, 50) * MB, rng.uniform(0.1, 9, 50) * MB
    expected = start + size / cap
    np.testing.assert_array_equal(solve(start, size, cap, np.zeros((50, 0), dtype=int), []).end_s, expected)
    np.testing.assert_array_equal(solve(start, size, cap, np.zeros((50, 2), dtype=int) - 1, [1.0]).end_s, expected)
    np.testing.assert_array_equal(solve(start, size, cap, np.zeros((50, 1), dtype=int), [np.inf]).end_s, expected)


def test_a_stopped_flow_frees_its_share_from_its_stop_instant():
    # A (13 MB) and B (20 MB), caps 8, in a 10 MB/s cell from 0: 5 each. B is cut at 1 with 5 MB moved; A then
    # runs at its cap 8: 8 MB left at 1, ends at 1 + 8 / 8 = 2.
    flows = solve([0.0, 0.0], [13 * MB, 20 * MB], [8 * MB, 8 * MB], [[0], [0]], [10 * MB], stop_s=[np.inf, 1.0])
    np.testing.assert_allclose(flows.end_s, [2.0, 1.0], atol=1e-9)
    np.testing.assert_array_equal(flows.done, [True, False])
    np.testing.assert_allclose(flows.moved, [13 * MB, 5 * MB], rtol=1e-12)
    assert flows.moved_by(1, 1.0) == pytest.approx(5 * MB) and flows.moved_by(1, 0.5) == pytest.approx(2.5 * MB)
    assert flows.moved_by(1, 7.0) == pytest.approx(5 * MB)            # nothing after the cut
    assert flows.moved_by(0, 1.5) == pytest.approx(9 * MB)            # 5 + 8 x 0.5
    assert flows.waited_s[1] == pytest.approx(1.0 - 5 / 8)            # ran 1 s for 5 MB it would move in 5/8 s
    # a flow finishing exactly at its stop instant is done; one stopped at or before its start moves nothing
    flows = solve([0.0, 2.0], [8 * MB, 8 * MB], [8 * MB, 8 * MB], NO_LINKS.repeat(2, 0), [], stop_s=[1.0, 1.5])
    np.testing.assert_array_equal(flows.done, [True, False])
    np.testing.assert_array_equal(flows.end_s, [1.0, 2.0])
    np.testing.assert_array_equal(flows.moved, [8 * MB, 0.0])


def test_zero_byte_flows_end_at_their_start_and_change_nobody_elses_end():
    start, size, cap, links, capacity = random_network(np.random.default_rng(11), 30, 4)
    without = solve(start, size, cap, links, capacity)
    size_with = np.append(size, [0.0, 0.0])
    flows = solve(np.append(start, [0.5, 2.0]), size_with, np.append(cap, [MB, MB]),
                  np.vstack([links, links[:2]]), capacity)
    np.testing.assert_array_equal(flows.end_s[:30], without.end_s)
    np.testing.assert_array_equal(flows.end_s[30:], [0.5, 2.0])
    assert flows.done[30:].all() and (flows.moved[30:] == 0).all() and (flows.waited_s[30:] == 0).all()


@pytest.mark.parametrize("seed", range(6))
def test_solving_again_from_an_instant_with_the_remaining_bytes_gives_the_same_ends(seed):
    start, size, cap, links, capacity, stop = random_network_with_stops(200 + seed, 40, 5)
    whole = solve(start, size, cap, links, capacity, stop)
    middle = len(whole.event_s) // 2
    for t in (whole.event_s[middle], (whole.event_s[middle] + whole.event_s[middle + 1]) / 2):
        rest, start_again, left = whole.still_to_move(t)
        assert (start_again[start[rest] < t] == t).all() and (left <= size[rest]).all()
        again = solve(start_again, left, cap[rest], links[rest], capacity, stop[rest])
        np.testing.assert_allclose(again.end_s, whole.end_s[rest], rtol=0, atol=1e-9)
        np.testing.assert_array_equal(again.done, whole.done[rest])
        np.testing.assert_allclose(again.moved + size[rest] - left, whole.moved[rest], rtol=1e-9)


@pytest.mark.parametrize("change, message", [
    (dict(links=[[0, 3]]), "links names link 3, but there are 2 links"),
    (dict(links=[[-2]]), "links names link -2"),
    (dict(bytes_=[-1.0]), "bytes_ must be finite and >= 0; got -1.0"),
    (dict(cap_Bps=[0.0]), "cap_Bps must be finite and > 0"),
    (dict(capacity_Bps=[1.0, -1.0]), "capacity_Bps must be > 0"),
    (dict(links=[[1, 1]]), "the same link twice"),
    (dict(stop_s=[1.0, 2.0]), "stop_s has 2 values for 1 flows"),
    (dict(links=[[0.5]]), "links must be an integer array"),
    (dict(start_s=[np.nan]), "start_s must be finite"),
])
def test_bad_inputs_are_refused_in_one_line(change, message):
    args = dict(start_s=[0.0], bytes_=[1.0], cap_Bps=[1.0], links=[[0]], capacity_Bps=[1.0, 2.0]) | change
    with pytest.raises(ValueError, match=message) as err:
        solve(**args)
    assert "\n" not in str(err.value)


def test_congestion_starts_when_the_caps_on_a_link_first_exceed_its_capacity():
    # link 0 of 10: [0, 4) at 6 and [2, 5) at 5 make 11 from 2. A flow ending at 2 as another starts there at 5
    # leaves 5 (the changes at one instant are taken together): never congested.
    args = dict(cap=np.array([6.0, 5.0]), links=np.array([[0], [0]]), capacity=np.array([10.0]))
    assert first_congestion(np.array([0.0, 2.0]), np.array([4.0, 5.0]), **args) == 2.0
    assert first_congestion(np.array([0.0, 2.0]), np.array([2.0, 5.0]), **args) == np.inf
    # the second flow on link 1 (inf) as well: the same; with no links at all: never
    two = dict(args, links=np.array([[0, -1], [1, 0]]), capacity=np.array([10.0, np.inf]))
    assert first_congestion(np.array([0.0, 2.0]), np.array([4.0, 5.0]), **two) == 2.0
    assert first_congestion(np.array([0.0]), np.array([4.0]), np.array([6.0]), np.zeros((1, 0), int), []) == np.inf
