"""Kept solves (testbed/network/meeting.py): flows solved each alone against fluid.solve, where two sets meet at
a link's capacity by hand, and asynchronous dispatches that keep the carried tasks' solves against solving every
carried task again."""
import math

import numpy as np
import pytest

from testbed.clock import Timeline
from testbed.network import meeting, solve
from testbed.network.contention import Carried, contend
from testbed.network.meeting import OnLinks, alone, of_profiles, of_solved
from testbed.network.topology import Topology

MB = 1e6


def test_flows_alone_on_their_links_are_what_the_solver_gives_bit_for_bit():
    # A below its cell's 10 MB/s, B above its cell's 4 MB/s (the cell binds), C cut at 2.5 s, D with no bytes
    start, size = np.array([0.5, 1.0, 0.0, 2.0]), np.array([7 * MB, 9 * MB, 8 * MB, 0.0])
    cap, stop = np.array([3 * MB, 6 * MB, 2 * MB, 1 * MB]), np.array([np.inf, np.inf, 2.5, np.inf])
    links, capacity = np.array([[0, 3], [1, 3], [2, -1], [2, 3]]), np.array([10 * MB, 4 * MB, np.inf, 100 * MB])
    apart, whole = alone(start, size, cap, links, capacity, stop), solve(start, size, cap, links, capacity, stop)
    assert apart.end_s.tolist() == whole.end_s.tolist() == [0.5 + 7 / 3, 1.0 + 9 / 4, 2.5, 2.0]
    for field in ("moved", "done", "waited_s", "breaks", "break_s", "break_moved", "break_Bps"):
        assert getattr(apart, field).tolist() == getattr(whole, field).tolist(), field
    assert apart.moved[2] == 2.5 * 2 * MB and apart.waited_s[1] == pytest.approx(9 / 4 - 9 / 6)


NOTHING = (of_profiles([], 0.0), np.zeros((0, 1), dtype=np.int64))


def kept_flow():
    """A kept flow on link 0 (10 MB/s): 8 MB/s over [0, 4) as its earlier solve had it (32 MB)."""
    return of_profiles([((0.0, 4.0), (0.0, 32 * MB))], t=1.0), np.array([[0]])


@pytest.mark.parametrize("new_cap, meets", [(1 * MB, False), (2 * MB, True), (5 * MB, True)])
def test_a_new_flow_meets_a_kept_one_where_their_rates_reach_the_links_capacity(new_cap, meets):
    kept, kept_links = kept_flow()
    assert kept.start.tolist() == [1.0] and kept.rate.tolist() == [8 * MB]   # from t = 1 on
    new = alone(np.array([2.0]), np.array([4 * MB]), np.array([new_cap]), np.array([[0]]), np.array([10 * MB]),
                np.array([np.inf]))
    both = OnLinks((of_solved(new), np.array([[0]])), NOTHING, (kept, kept_links), np.array([10 * MB]))
    # 8 + 1 = 9 < 10: apart; 8 + 2 = 10 fills the link, 8 + 5 = 13 over it: the kept flow is taken in
    assert not both.apart_fails() and both.meeting().tolist() == [meets]


@pytest.mark.parametrize("seed", range(5))
def test_a_few_flows_alone_in_python_floats_are_the_arrays_bit_for_bit(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        n = int(rng.integers(0, meeting.FEW + 1))
        start = rng.uniform(0, 10, n).round(int(rng.integers(0, 3)))   # rounded: ties with the stops
        size = np.where(rng.random(n) < 0.2, 0.0, rng.uniform(1, 1e7, n))
        cap, links = rng.uniform(1e5, 1e7, n), rng.integers(-1, 5, (n, 3))
        capacity = np.where(rng.random(5) < 0.3, np.inf, rng.uniform(1e5, 2e7, 5))
        stop = np.where(rng.random(n) < 0.5, np.inf, start + rng.uniform(-1, 5, n))
        few = alone(start, size, cap, links, capacity, stop)
        monkeypatch.setattr(meeting, "FEW", -1)
        arrays = alone(start, size, cap, links, capacity, stop)
        monkeypatch.undo()
        for a, b in zip(few, arrays):
            assert a.dtype == b.dtype and repr(a.tolist()) == repr(b.tolist())


def test_a_new_flow_that_starts_after_the_kept_one_ends_never_meets_it():
    kept, kept_links = kept_flow()
    new = alone(np.array([4.0]), np.array([4 * MB]), np.array([9 * MB]), np.array([[0]]), np.array([10 * MB]),
                np.array([np.inf]))
    both = OnLinks((of_solved(new), np.array([[0]])), NOTHING, (kept, kept_links), np.array([10 * MB]))
    assert not both.apart_fails() and not both.meeting().any()
    # links.csv's rows from t = 1: the kept flow's 8 MB/s until 4, then the new one's 9 until 4 + 4/9
    rows = list(zip(*(column.tolist() for column in both.usage_rows())))
    assert rows == [(0, 1.0, 4.0, 8 * MB), (0, 4.0, 4.0 + 4 / 9, 9 * MB)]


def two_worlds(seed: int, n: int = 24, cells: int = 3, dispatches: int = 12):
    """Random dispatches of 1-4 tasks to idle devices through `cells` cells behind a server link, some devices
    going offline mid-task: each world plans them with the tasks in flight carried, one keeping the solves that
    stand (keep=True), the other solving every carried task again. Returns each task's timeline, per world."""
    rng = np.random.default_rng(seed)
    capacity = {d: np.concatenate([rng.uniform(2, 9, cells) * MB, np.full(cells, np.inf), [rng.uniform(8, 20) * MB]])
                for d in ("down", "up")}
    topology = Topology(np.arange(n) % cells, tuple(f"c.{i}" for i in range(cells)), capacity, (None,) * cells)
    down, up, latency = rng.uniform(1, 8, n) * MB, rng.uniform(0.5, 4, n) * MB, rng.uniform(0, 0.2, n)
    offline = np.where(rng.random(n) < 0.25, rng.uniform(1, 12, n), np.inf)
    worlds = {True: {}, False: {}}
    t = 0.0
    for _ in range(dispatches):
        t += rng.exponential(0.6)
        busy = [d for d, tl in worlds[True].items() if _end(tl, offline[d]) > t or offline[d] <= t]
        picked = rng.permutation(np.setdiff1d(np.arange(n), busy))[:rng.integers(1, 5)]
        timelines = [Timeline(int(4 * MB), 10, int(2 * MB), float(latency[d]), float(down[d]), float(up[d]),
                              (latency[d] + 4 * MB / down[d], float(rng.uniform(0.1, 2.0)), latency[d] + 2 * MB / up[d]))
                     for d in picked]
        for keep, flights in worlds.items():
            carried = tuple(Carried(d, tl, float(offline[d])) for d, tl in flights.items()
                            if _end(tl, offline[d]) > t)
            shared, _ = contend(topology, t, picked, timelines, offline[picked], True, carried, keep=keep)
            flights.update(zip([c.device for c in carried] + picked.tolist(), shared))
    return worlds


def _end(tl, offline_at: float) -> float:
    end = tl.starts[0] + sum(tl.seconds)
    return end if math.isfinite(end) else offline_at


@pytest.mark.parametrize("seed", range(12))
def test_keeping_the_solves_that_stand_gives_every_task_the_instants_of_solving_all_again(seed):
    kept, again = two_worlds(seed).values()
    assert kept.keys() == again.keys()
    for d in kept:
        np.testing.assert_allclose(kept[d].starts, again[d].starts, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(kept[d].seconds, again[d].seconds, rtol=1e-12, atol=1e-9)
