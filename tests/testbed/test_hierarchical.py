"""Hierarchical aggregation (HierFAVG, protocols/hierarchical.py), checked against a cloud round computed by hand.

Four devices on the tiny data set (60 samples, IID: 15 each), logreg (21 fp32 parameters: 84 bytes), 3 local steps
of 5 samples: 3 x 18 multiply-adds x 15 samples = 810 multiply-adds = 1,620 FLOP a task. Always online.
Cell a (kind a) holds devices 0, 2, 3; cell b (kind b) device 1; their links (1e12 B/s) never bind.
    device 0 (a): 1,620 FLOP/s, 84 B/s each way, no latency -> download 1 s, compute 1 s, upload 1 s: 3 s
    device 1 (b):   810 FLOP/s, 84 B/s                      -> 1 + 2 + 1 = 4 s
    device 2 (a):   405 FLOP/s, 42 B/s                      -> 2 + 4 + 2 = 8 s
    device 3 (a): 1,620 FLOP/s, 42 B/s, latency 0.25 s      -> 2.25 + 1 + 2.25 = 5.5 s
Backhaul a: down 42 B/s, up 84 B/s, latency 0.5 s -> down 0.5 + 2 = 2.5 s, up 0.5 + 1 = 1.5 s
Backhaul b: down 84 B/s, up 42 B/s, latency 0.25 s -> down 0.25 + 1 = 1.25 s, up 0.25 + 2 = 2.25 s
K = 3 a round, so every device of a cell trains in each of its edge rounds; edge_rounds 2:
    edge a: down [0, 2.5], rounds [2.5, 10.5] and [10.5, 18.5] (device 2's 8 s), up [18.5, 20]
    edge b: down [0, 1.25], rounds [1.25, 5.25] and [5.25, 9.25], up [9.25, 11.5]
    the cloud round closes at 20 (edge a's upload); the second starts there and ends at 40.
Per cloud round: 8 tasks (672 bytes each way, 6,480 multiply-adds), 2 x 84 backhaul bytes each way; the cloud
weighs edge a's update by 3 x 2 x 15 = 90 samples, edge b's by 2 x 15 = 30.
(Every instant is exact in binary floating point.)
"""
import copy

import pandas as pd
import pytest
import torch
from helpers import run_killed_after, tiny_blobs

import testbed.data
from analysis.metrics import round_breakdown
from analysis.plots import plot_breakdown, plot_gantt
from analysis.runs import load_run
from testbed import scenario as sc
from testbed.engine import Engine
from testbed.errors import TestbedError
from testbed.runner import run_scenario

NEVER_BINDS = 1e12
EXACT = 1e-9


@pytest.fixture(autouse=True)
def _tiny_data(monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)


def _group(flops, link, latency=0.0):
    return {"profile": "raspberry_pi_4", "count": 1, "peak_flops": flops, "efficiency": 1.0, "down_Bps": link,
            "up_Bps": link, "latency_s": latency}


def _cell(name, groups, down, up, latency):
    return {"name": name, "down_Bps": NEVER_BINDS, "up_Bps": NEVER_BINDS, "groups": groups,
            "backhaul": {"down_Bps": down, "up_Bps": up, "latency_s": latency}}


def two_cells(rounds: int = 1) -> dict:
    return {"name": "hier", "seed": 0, "data": {"name": "tiny_blobs", "partition": {"kind": "iid"}},
            "model": {"name": "logreg"},
            "fleet": {"groups": [_group(1620.0, 84.0), _group(810.0, 84.0), _group(405.0, 42.0),
                                 _group(1620.0, 42.0, 0.25)]},
            "network": {"cells": [_cell("a", [0, 2, 3], 42.0, 84.0, 0.5), _cell("b", [1], 84.0, 42.0, 0.25)]},
            "protocol": {"kind": "hierarchical", "edge_rounds": 2}, "round": {"clients_per_round": 3},
            "client": {"lr": 0.1, "batch_size": 5, "local_steps": 3}, "algorithm": {"name": "fedavg"},
            "stop": {"max_rounds": rounds}}


class Recording:
    """A strategy that records, per task (device, round), the model it trained from and the model it trained,
    and the cloud's aggregations: the model before, the edges' updates, the model after."""

    def __init__(self, strategy):
        self.strategy, self.tasks, self.aggregations = strategy, {}, []

    def __getattr__(self, name):
        return getattr(self.strategy, name)

    def finish(self, task, trained, received, stats, opt_state):
        self.tasks[(task.device, task.round)] = (task.num_samples, {n: t.clone() for n, t in received.items()},
                                                 {n: t.clone() for n, t in trained.items()})
        return self.strategy.finish(task, trained, received, stats, opt_state)

    def aggregate(self, state, round, arrivals, failures):
        after, metrics = self.strategy.aggregate(state, round, arrivals, failures)
        self.aggregations.append((state.params, [(a.device, a.num_samples, a.update) for a in arrivals],
                                  after.params))
        return after, metrics


def simulate(raw):
    exp = sc.build(sc.validate(raw, "test"))
    exp.strategy = recorder = Recording(exp.strategy)
    records, events = [], []
    Engine(exp, lambda record, rows: (records.append(record), events.extend(rows))).run()
    return pd.DataFrame(records), pd.DataFrame(events), recorder


def _spans(events, device, phase):
    rows = events[(events["device"] == device) & (events["phase"] == phase)]
    return list(zip(rows["start_s"], rows["end_s"]))


def _check(got, expected):
    assert len(got) == len(expected)
    for (start, end), (want_start, want_end) in zip(got, expected):
        assert start == pytest.approx(want_start, abs=EXACT) and end == pytest.approx(want_end, abs=EXACT)


def test_one_cloud_round_by_hand():
    rounds, events, _ = simulate(two_cells(rounds=2))
    first = events[events["round"] == 1]
    # the edges: -2 - cell; their backhaul transfers
    _check(_spans(first, -2, "backhaul_down"), [(0, 2.5)])
    _check(_spans(first, -2, "backhaul_up"), [(18.5, 20)])
    _check(_spans(first, -3, "backhaul_down"), [(0, 1.25)])
    _check(_spans(first, -3, "backhaul_up"), [(9.25, 11.5)])
    # cell a's devices, each edge round from the last one's close (device 2's upload end)
    _check(_spans(first, 0, "download"), [(2.5, 3.5), (10.5, 11.5)])
    _check(_spans(first, 0, "compute"), [(3.5, 4.5), (11.5, 12.5)])
    _check(_spans(first, 0, "upload"), [(4.5, 5.5), (12.5, 13.5)])
    _check(_spans(first, 2, "download"), [(2.5, 4.5), (10.5, 12.5)])
    _check(_spans(first, 2, "compute"), [(4.5, 8.5), (12.5, 16.5)])
    _check(_spans(first, 2, "upload"), [(8.5, 10.5), (16.5, 18.5)])
    _check(_spans(first, 3, "download"), [(2.5, 4.75), (10.5, 12.75)])
    _check(_spans(first, 3, "compute"), [(4.75, 5.75), (12.75, 13.75)])
    _check(_spans(first, 3, "upload"), [(5.75, 8.0), (13.75, 16.0)])
    # cell b's device, on its own edge's clock
    _check(_spans(first, 1, "download"), [(1.25, 2.25), (5.25, 6.25)])
    _check(_spans(first, 1, "compute"), [(2.25, 4.25), (6.25, 8.25)])
    _check(_spans(first, 1, "upload"), [(4.25, 5.25), (8.25, 9.25)])
    assert first.loc[first["device"] >= 0, "edge_round"].tolist() == [1] * 9 + [2] * 9 + [1] * 3 + [2] * 3
    assert (first["outcome"] == "done").all()
    # the second cloud round starts where the first closed
    second = events[events["round"] == 2]
    _check(_spans(second, -2, "backhaul_down"), [(20, 22.5)])
    _check(_spans(second, 2, "upload"), [(28.5, 30.5), (36.5, 38.5)])
    assert second.loc[second["device"] >= 0, "edge_round"].tolist() == [3] * 9 + [4] * 9 + [3] * 3 + [4] * 3
    assert rounds["t_start_s"].tolist() == [0, 20] and rounds["t_end_s"].tolist() == [20, 40]
    assert rounds["selected"].tolist() == [8, 8] and rounds["arrived"].tolist() == [8, 8]
    assert rounds["edge_rounds"].tolist() == [4, 4]
    assert rounds["bytes_down"].tolist() == [8 * 84] * 2 and rounds["bytes_up"].tolist() == [8 * 84] * 2
    assert rounds["flops"].tolist() == [8 * 810] * 2
    assert rounds["backhaul_bytes_down"].tolist() == [2 * 84] * 2
    assert rounds["backhaul_bytes_up"].tolist() == [2 * 84] * 2
    assert sc.validate(two_cells(rounds=2), "test").selection_rounds == 4   # what a selector is bound with


def _mean_step(tasks, start):
    """start + the samples-weighted mean of the tasks' (num_samples, received, trained) model changes."""
    total = sum(n for n, _, _ in tasks)
    return {k: start[k] + sum(n * (trained[k] - received[k]) for n, received, trained in tasks) / total
            for k in start}


def _close(a, b):
    return all(torch.allclose(a[k], b[k], atol=1e-6, rtol=0) for k in a)


def test_an_edge_round_closes_at_the_deadline():
    raw = two_cells()
    raw["round"]["deadline_s"] = 6.0   # device 2's 8 s task is late in both of edge a's rounds
    rounds, events, recorder = simulate(raw)
    # edge a: rounds [2.5, 8.5] and [8.5, 14.5]; device 2's compute ends at each close, where its upload would
    # start (kept with no length, as sync does); up [14.5, 16]
    _check(_spans(events, 2, "compute"), [(4.5, 8.5), (10.5, 14.5)])
    _check(_spans(events, 2, "upload"), [(8.5, 8.5), (14.5, 14.5)])
    _check(_spans(events, -2, "backhaul_up"), [(14.5, 16)])
    assert events.loc[events["device"] == 2, "outcome"].eq("late").all()
    assert rounds[["t_end_s", "selected", "arrived", "late"]].values.tolist() == [[16, 8, 6, 2]]
    assert [(device, n) for device, n, _ in recorder.aggregations[0][1]] == [(-2, 60), (-3, 30)]


def test_an_edge_waits_for_its_devices_to_come_online(tmp_path):
    (tmp_path / "b.csv").write_text("device,start_s,end_s\nb,3,1e9\n")   # device 1, cell b's only one, from 3 s
    raw = two_cells()
    raw["fleet"]["groups"][1]["availability"] = {"kind": "trace", "file": str(tmp_path / "b.csv")}
    rounds, events, _ = simulate(raw)
    # edge b's model arrives at 1.25 s; its rounds run from 3 s: [3, 7] and [7, 11], its upload [11, 13.25]
    _check(_spans(events, 1, "download"), [(3, 4), (7, 8)])
    _check(_spans(events, -3, "backhaul_up"), [(11, 13.25)])
    assert rounds["t_end_s"].tolist() == [20] and rounds["online"].tolist() == [3]


def test_edges_average_their_devices_and_the_cloud_averages_the_edges_by_samples():
    _, _, recorder = simulate(two_cells())
    (x0, updates, x1), = recorder.aggregations
    tasks = recorder.tasks
    assert sorted(tasks) == [(d, g) for d in range(4) for g in (1, 2)]
    edges = {}
    for edge, members in (("a", (0, 2, 3)), ("b", (1,))):
        model = x0
        for g in (1, 2):
            assert all(_close(tasks[(d, g)][1], model) for d in members)   # each edge round from the edge's model
            model = _mean_step([tasks[(d, g)] for d in members], model)
        edges[edge] = model
    assert [(device, n) for device, n, _ in updates] == [(-2, 90), (-3, 30)]
    assert _close(updates[0][2], {k: edges["a"][k] - x0[k] for k in x0})
    expected = {k: (90 * edges["a"][k] + 30 * edges["b"][k]) / 120 for k in x0}
    assert _close(x1, expected) and not _close(x1, {k: (edges["a"][k] + edges["b"][k]) / 2 for k in x0})


def test_the_cloud_runs_the_scenarios_server_rule():
    _, _, recorder = simulate(two_cells() | {"algorithm": {"name": "fedadam", "server_lr": 0.01}})
    (x0, updates, x1), = recorder.aggregations
    assert [(device, n) for device, n, _ in updates] == [(-2, 90), (-3, 30)]
    fedavg = {k: x0[k] + (90 * updates[0][2][k] + 30 * updates[1][2][k]) / 120 for k in x0}
    # Adam's first step moves every entry by about server_lr (m / sqrt(v) ~ 1 where the update is well above tau)
    assert not _close(x1, fedavg) and max((x1[k] - x0[k]).abs().max().item() for k in x0) <= 0.01 + 1e-6


def test_one_cell_and_one_edge_round_is_a_sync_round():
    raw = two_cells()
    raw["network"]["cells"] = [_cell("a", [0, 1, 2, 3], 42.0, 84.0, 0.5)]
    raw["protocol"]["edge_rounds"] = 1
    raw["round"]["clients_per_round"] = 4
    sync = {k: v for k, v in copy.deepcopy(raw).items() if k not in ("network", "protocol")}
    _, hier_events, hier = simulate(raw)
    _, sync_events, flat = simulate(sync)
    assert _close(hier.aggregations[0][2], flat.aggregations[0][2])
    devices = hier_events[hier_events["device"] >= 0]
    assert (devices["start_s"].to_numpy() - 2.5 == pytest.approx(sync_events["start_s"].to_numpy(), abs=EXACT))
    assert (devices["end_s"].to_numpy() - 2.5 == pytest.approx(sync_events["end_s"].to_numpy(), abs=EXACT))


def test_the_same_seed_gives_the_same_tables_and_a_killed_run_resumes(tmp_path):
    raw = two_cells(rounds=3) | {"checkpoint": {"every_rounds": 1}}
    reference, summary = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "unbroken", quiet=True)
    again, _ = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "again", quiet=True)
    tables = ("rounds.csv", "events.csv")
    assert [(again / t).read_bytes() for t in tables] == [(reference / t).read_bytes() for t in tables]
    run_killed_after(raw, tmp_path / "broken", 2)
    run, resumed = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "broken", quiet=True, resume=True)
    assert resumed == summary
    assert [(run / t).read_bytes() for t in tables] == [(reference / t).read_bytes() for t in tables]


def test_the_breakdown_counts_each_tasks_wait_on_its_edges_backhaul(tmp_path):
    run_dir, _ = run_scenario(sc.validate(two_cells(), "test"), "test", tmp_path, quiet=True)
    run = load_run(run_dir)
    # eight tasks over the 20 s round: edge a's six wait 2.5 + 1.5 s on its backhaul, edge b's two 1.25 + 2.25 s;
    # computing 2 x (1 + 4 + 1) + 2 x 2 s, communicating 2 x (2 + 4 + 4.5) + 2 x 2 s; the rest idle
    assert round_breakdown(run.rounds, run.events).loc[1].to_dict() == pytest.approx(
        {"compute_s": 16.0, "communication_s": 25.0, "wasted_s": 0.0, "backhaul_s": 31.0,
         "idle_s": 8 * 20 - 16 - 25 - 31}, abs=EXACT)
    assert plot_breakdown(run, tmp_path / "breakdown.png").stat().st_size > 0
    assert plot_gantt(run, tmp_path / "gantt.png").stat().st_size > 0


def test_energy_is_the_devices_and_the_backhaul_rows_have_none(tmp_path):
    raw = two_cells() | {"resources": {"energy": True}}
    run_dir, summary = run_scenario(sc.validate(raw, "test"), "test", tmp_path, quiet=True)
    events = pd.read_csv(run_dir / "events.csv")
    devices = events["device"] >= 0
    assert events.loc[~devices, "energy_J"].isna().all() and (events.loc[devices, "energy_J"] > 0).all()
    assert summary["energy_J_total"] == pytest.approx(events.loc[devices, "energy_J"].sum())


def _without(raw, change):
    raw = copy.deepcopy(raw)
    change(raw)
    return raw


@pytest.mark.parametrize("change, message", [
    (lambda raw: raw.pop("network"), "network: hierarchical aggregation needs cells"),
    (lambda raw: raw["network"]["cells"][1].update(groups=[]), "network.cells.1.groups"),
    (lambda raw: raw["network"]["cells"].pop(1), "fleet.groups.1: its devices are in no cell"),
    (lambda raw: raw["network"]["cells"][1].pop("backhaul"), "network.cells.1.backhaul: its edge servers need"),
    (lambda raw: raw.update(algorithm={"name": "fedlps"}), "protocol: the cloud aggregates the edges' model deltas"),
    (lambda raw: raw["protocol"].update(edge_rounds=0), "protocol.edge_rounds: Input should be greater than 0"),
])
def test_a_hierarchy_that_cannot_run_is_refused_in_one_line(change, message):
    with pytest.raises(TestbedError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        sc.validate(_without(two_cells(), change), "test")
    assert "\n" not in str(err.value)


def test_the_backhauls_share_the_clouds_egress():
    # the cloud's egress 63 B/s; the 84-byte model goes down both backhauls. [0.25, 0.5): b alone (its latency
    # 0.25), at min(84, 63) = 63: 15.75 B. From 0.5 a joins: 31.5 each (both caps above). b's 68.25 B left end at
    # 0.5 + 68.25 / 31.5 = 8/3; a, which moved as much, has 15.75 B left, alone at its 42 B/s: + 0.375
    raw = two_cells()
    raw["network"]["server"] = {"down_Bps": 63.0}
    rounds, events, _ = simulate(raw)
    b_arrives, a_arrives = 0.5 + 68.25 / 31.5, 0.5 + 68.25 / 31.5 + 15.75 / 42
    _check(_spans(events, -3, "backhaul_down"), [(0, b_arrives)])
    _check(_spans(events, -2, "backhaul_down"), [(0, a_arrives)])
    # then as by hand above: edge a's two 8 s rounds and its 1.5 s upload (the ingress is not limited), b's 4 s
    # rounds and 2.25 s upload
    _check(_spans(events, -2, "backhaul_up"), [(a_arrives + 16, a_arrives + 17.5)])
    _check(_spans(events, -3, "backhaul_up"), [(b_arrives + 8, b_arrives + 10.25)])
    assert rounds["t_end_s"].iloc[0] == pytest.approx(a_arrives + 17.5, abs=EXACT)
