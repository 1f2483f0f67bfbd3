"""An asynchronous run's flows in flight (testbed/network/inflight.py): links.csv's rows summed by hand, the quick
check against its definition, tasks that leave, older checkpoints, and dispatches solved beside the flows in flight
against the full solve, bit for bit."""
import math

import numpy as np
import pytest

from testbed import migrations
from testbed.clock import Timeline
from testbed.network.contention import Carried, SharedTimeline, beside_in_flight, contend
from testbed.network import meeting
from testbed.network.inflight import InFlightLinks, _link_steps
from testbed.network.topology import Topology

NO_FLOW = ((), ())


def topology(cells: int = 2, devices: int = 4) -> Topology:
    """`cells` cells of 10 B/s each way (devices dealt in turn), no backhaul, behind a server of 100 B/s each way:
    a device's links are its cell's (index = cell), -1, and the server's (index 2 * cells)."""
    capacity = {d: np.array([10.0] * cells + [math.inf] * cells + [100.0]) for d in ("down", "up")}
    return Topology(np.arange(devices) % cells, tuple(f"c.{i}" for i in range(cells)), capacity, (None,) * cells)


def task(down=NO_FLOW, up=NO_FLOW, start: float = 0.0, seconds=(1.0, 1.0, 1.0)) -> SharedTimeline:
    return SharedTimeline(10, 1, 10, 0.0, 1.0, 1.0, seconds, (start, start + seconds[0], start + sum(seconds[:2])),
                          down, up)


def test_links_csv_rows_are_the_flows_rates_summed_by_hand():
    flows = InFlightLinks(topology())
    # device 0: 5 B/s down over [0, 2), 2 B/s up over [3, 4); device 2 (the same cell): 3 B/s down over [1, 3)
    flows.add([0, 2], [task(((0.0, 2.0), (0.0, 10.0)), ((3.0, 4.0), (0.0, 2.0))), task(((1.0, 3.0), (0.0, 6.0)))],
              [9.0, 9.0], 0.0)
    # cell 0 is link 0, the server link 4; by start, then direction, then link
    assert flows.take(2.5) == [("down", 0, 0.0, 1.0, 5.0), ("down", 4, 0.0, 1.0, 5.0),
                               ("down", 0, 1.0, 2.0, 8.0), ("down", 4, 1.0, 2.0, 8.0),
                               ("down", 0, 2.0, 2.5, 3.0), ("down", 4, 2.0, 2.5, 3.0)]
    assert flows.take(5.0) == [("down", 0, 2.5, 3.0, 3.0), ("down", 4, 2.5, 3.0, 3.0),
                               ("up", 0, 3.0, 4.0, 2.0), ("up", 4, 3.0, 4.0, 2.0)]
    assert flows.take(9.0) == [] and not any(flows.rows.values())


def test_the_quick_check_passes_only_where_no_link_can_reach_its_capacity():
    flows = InFlightLinks(topology())
    flows.add([0], [task(((0.0, 5.0), (0.0, 30.0)))], [9.0], 0.0)   # 6 B/s down on cell 0 over [0, 5)
    cell0, cell1 = [0, -1, 4], [1, -1, 4]
    assert not flows.unclear("down", [(1.0, 2.0, 3.0, cell0)])                 # 6 + 3 of 10
    assert flows.unclear("down", [(1.0, 2.0, 5.0, cell0)]) == {0}              # 6 + 5: the exact check decides
    assert not flows.unclear("down", [(5.0, 6.0, 10.0, cell0)])                # after the kept one: alone, full
    assert not flows.unclear("down", [(0.0, 1.0, 10.0, cell1)])                # alone on the other cell
    assert flows.unclear("down", [(0.0, 1.0, 6.0, cell1), (0.5, 1.5, 6.0, cell1)]) == {1}   # two new ones crowd it
    assert not flows.unclear("up", [(0.0, 1.0, 9.0, cell0)])                   # the kept flow moves nothing up
    # one flow after another (a dispatch's few, in turn): the new ones before it count where their spans meet its
    assert not flows.clear_one("down", 0.5, 1.5, 6.0, cell1, {1: [(0.0, 1.0, 6.0)]})   # 6 + 6 on cell 1
    assert flows.clear_one("down", 1.0, 2.0, 6.0, cell1, {1: [(0.0, 1.0, 6.0)]})       # after it: alone
    assert flows.clear_one("down", 0.5, 1.5, 3.0, cell1, {1: [(0.0, 1.0, 6.0)]})       # 6 + 3 of 10


def test_a_full_solve_skips_the_exact_check_only_where_no_kept_row_can_reach_a_capacity_with_it():
    flows = InFlightLinks(topology())
    kept_task = task(((0.0, 5.0), (0.0, 30.0)))                  # 6 B/s down on cell 0 over [0, 5)
    flows.add([0], [kept_task], [9.0], 0.0)
    cell0, cell1 = [0, -1, 4], [1, -1, 4]

    def solved(*segments, links=(cell0,)):   # (start, end, rate, flow) each, and each flow's links
        start, end, rate, flow = (np.array(column) for column in zip(*segments))
        return meeting.Segments(start, end, rate, flow.astype(np.int64)), np.array(links, dtype=np.int64)

    nothing = (meeting.NONE, np.zeros((0, 3), dtype=np.int64))
    rows = flows.kept("down", 0.0, {0: Carried(0, kept_task, 9.0)})
    assert rows.clear(solved((1.0, 2.0, 3.0, 0)), nothing)                       # 6 + 3 of 10
    assert not rows.clear(solved((1.0, 2.0, 5.0, 0)), nothing)                   # 6 + 5: OnLinks decides
    assert not rows.clear(solved((1.0, 2.0, 2.0, 0), (1.5, 3.0, 2.0, 1), links=(cell0, cell0)), nothing)   # 6 + 2 + 2
    assert rows.clear(solved((1.0, 2.0, 2.0, 0), (2.0, 3.0, 2.0, 1), links=(cell0, cell0)), nothing)   # in turn
    assert rows.clear(solved((0.0, 1.0, 5.0, 0), (0.0, 1.0, 5.0, 1), links=(cell1, cell1)), nothing)   # no kept row
    assert not rows.clear(nothing, solved((1.0, 2.0, 5.0, 0)))                   # what a re-solved flow was: 6 + 5
    assert rows.take_serials([0]) == [0] and rows.clear(solved((1.0, 2.0, 5.0, 0)), nothing)   # none kept now


def test_a_task_that_left_keeps_its_rows_for_links_csv_but_not_for_dispatches():
    flows = InFlightLinks(topology())
    tl = task(((0.0, 4.0), (0.0, 24.0)))   # 6 B/s down over [0, 4): its battery cut it at 1, say
    flows.add([0], [tl], [9.0], 0.0)
    assert flows.hold({0: Carried(0, tl, 9.0)}) and flows.moving("down", 2.0)
    assert flows.hold({})   # it left
    assert not flows.moving("down", 2.0) and not flows.unclear("down", [(2.0, 3.0, 10.0, [0, -1, 4])])
    assert flows.take(4.0) == [("down", 0, 0.0, 4.0, 6.0), ("down", 4, 0.0, 4.0, 6.0)]


def test_a_task_whose_device_goes_offline_before_its_end_is_solved_in_full():
    flows = InFlightLinks(topology())
    tl = task(((0.0, 4.0), (0.0, 24.0)))   # ends at 3 (its phases' seconds); its device goes offline at 2
    flows.add([0], [tl], [2.0], 0.0)
    assert not flows.hold({0: Carried(0, tl, 2.0)})


def test_an_older_checkpoints_rows_are_kept_up_to_its_instant():
    rows = [{"link": "c.0", "direction": "down", "capacity_Bps": 10.0, "t_start_s": 0.0, "t_end_s": 4.0, "Bps": 6.0},
            {"link": "c.0", "direction": "down", "capacity_Bps": 10.0, "t_start_s": 5.0, "t_end_s": 6.0, "Bps": 3.0}]
    pending, flows = migrations.link_rows({"links": rows}, 3.0)
    assert [(r["t_start_s"], r["t_end_s"]) for r in pending] == [(0.0, 3.0)] and flows == {"since": 3.0, "rows": {}}
    saved = {"since": 3.0, "rows": {}, "held": {}, "serials": 0}
    assert migrations.link_rows({"links": [], "link_flows": saved}, 3.0) == ([], saved)


def dispatches(seed: int, n: int = 24, cells: int = 3, count: int = 14):
    """Random dispatches of 1-4 tasks to idle devices through `cells` cells behind a server link, some devices
    going offline mid-task, planned as planning.contended plans an asynchronous dispatch: beside the flows in
    flight where they hold and it can, else the full solve told them (taking what beside them found: the
    downloads, where only the uploads met; whom they met); and, in a second world, every dispatch by the full solve
    alone. Returns each world's timelines, how many dispatches went beside the flows, how many full solves took
    such downloads, and how many took the flows in flight met beside them."""
    rng = np.random.default_rng(seed)
    capacity = {d: np.concatenate([rng.uniform(2, 9, cells) * 1e6, np.full(cells, np.inf), [rng.uniform(8, 20) * 1e6]])
                for d in ("down", "up")}
    net = Topology(np.arange(n) % cells, tuple(f"c.{i}" for i in range(cells)), capacity, (None,) * cells)
    down, up, latency = rng.uniform(1, 8, n) * 1e6, rng.uniform(0.5, 4, n) * 1e6, rng.uniform(0, 0.2, n)
    offline = np.where(rng.random(n) < 0.25, rng.uniform(1, 12, n), np.inf)
    flows, worlds, beside, taken, met, t = InFlightLinks(net), ({}, {}), 0, 0, 0, 0.0
    for _ in range(count):
        t += rng.exponential(0.6)
        busy = [d for d, tl in worlds[1].items() if _end(tl, offline[d]) > t or offline[d] <= t]
        picked = rng.permutation(np.setdiff1d(np.arange(n), busy))[:rng.integers(1, 5)]
        size = rng.choice([2e5, 4e6])   # small transfers seldom meet, large ones often
        timelines = [Timeline(int(size), 10, int(size / 2), float(latency[d]), float(down[d]), float(up[d]),
                              (latency[d] + size / down[d], float(rng.uniform(0.1, 2.0)), latency[d] + size / 2 / up[d]))
                     for d in picked]
        for world in worlds:
            carried = tuple(Carried(d, tl, float(offline[d])) for d, tl in world.items() if _end(tl, offline[d]) > t)
            found = []   # where beside the flows fails: what it found (the downloads it solved, whom they met)
            if world is worlds[1]:
                shared, _ = contend(net, t, picked, timelines, offline[picked], True, carried)
            elif flows.hold({c.device: c for c in carried}) and (new := beside_in_flight(
                    net, t, picked, timelines, offline[picked], flows, found)) is not None:
                shared, beside = [c.timeline for c in carried] + new, beside + 1
                flows.add(picked.tolist(), new, offline[picked].tolist(), t)
            else:
                taken += bool(found and found[0].downloaded is not None)
                met += bool(found and found[0].met.serials)
                shared, _ = contend(net, t, picked, timelines, offline[picked], True, carried, in_flight=flows,
                                    beside=found.pop() if found else None)
                flows.record({c.device: c for c in carried}, shared, [c.offline_at for c in carried]
                             + offline[picked].tolist(), picked.tolist())
            world.update(zip([c.device for c in carried] + picked.tolist(), shared))
    return worlds, beside, taken, met


def _end(tl, offline_at: float) -> float:
    end = tl.starts[0] + sum(tl.seconds)
    return end if math.isfinite(end) else offline_at


@pytest.mark.parametrize("seed", range(10))
def test_dispatching_beside_the_flows_in_flight_gives_the_full_solves_timelines_bit_for_bit(seed):
    (quick, full), beside, _, _ = dispatches(seed)
    assert quick.keys() == full.keys()
    for d in quick:
        assert (quick[d].starts, quick[d].seconds, quick[d].down_profile, quick[d].up_profile) == (
            full[d].starts, full[d].seconds, full[d].down_profile, full[d].up_profile)
    assert 2 <= beside <= 10   # of 14: some went beside the flows in flight (2-10 over the seeds), some in full



def test_full_solves_take_the_downloads_solved_beside_the_flows_where_only_the_uploads_met():
    # the bit-for-bit test above covers these dispatches: here, that some seeds make them, and full solves that
    # take the flows in flight met beside them as their first pass
    runs = [dispatches(seed) for seed in range(10)]
    assert sum(run[2] for run in runs) > 0 and sum(run[3] for run in runs) > 0


def test_a_links_rate_is_its_flows_exact_sum_and_a_lone_flow_its_own_rate():
    # 0.1 + 0.2 rounds up (0.30000000000000004); a running sum would carry what is left of it to the lone 0.3
    rows = [(0.0, 1.0, 0.1, 0, 0), (0.0, 2.0, 0.2, 0, 1), (3.0, 5.0, 0.3, 0, 2), (1.0, 4.0, 0.3, 0, 3)]
    assert _link_steps(1, 0, rows, 0.5, 4.5) == [(0.5, 1, 0, 1.0, 0.1 + 0.2), (1.0, 1, 0, 2.0, 0.5), (2.0, 1, 0, 3.0, 0.3),
                                                 (3.0, 1, 0, 4.0, 0.6), (4.0, 1, 0, 4.5, 0.3)]
    assert 0.1 + 0.2 != 0.3 and 0.2 + 0.3 == 0.5 and 0.3 + 0.3 == 0.6


@pytest.mark.parametrize("seed", range(20))
def test_links_csv_steps_are_each_instants_exact_sum(seed):
    # rows with ties in every field (a link's flows starting or ending together at equal rates) and rates that
    # round when summed, in any order: each step is math.fsum of the rates of the rows over it, bit for bit
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    instants, rates = np.round(rng.uniform(0, 4, 12), 1), rng.choice([0.0, 0.1, 0.2, 0.3, 1 / 3, 7e6, 2.5e6], 6)
    rows = []
    for task in range(n):
        start, end = np.sort(rng.choice(instants, 2, replace=False))
        rows.append((float(start), float(end), float(rng.choice(rates)), 3, task))
    since, t_end = 0.5, 3.5
    rows = [row for row in rows if row[0] < t_end and row[1] > since]
    cut = [(max(start, since), min(end, t_end), rate) for start, end, rate, _, _ in rows]
    changes = sorted({instant for start, end, _ in cut for instant in (start, end)})
    expected = [(a, 0, 3, b, math.fsum(rate for start, end, rate in cut if start <= a < end))
                for a, b in zip(changes, changes[1:]) if any(start <= a < end for start, end, _ in cut)]
    for order in (rows, rows[::-1], sorted(rows, key=lambda row: row[2])):
        assert repr(_link_steps(0, 3, order, since, t_end)) == repr(expected)
