"""A synchronous round through a shared cell and the server's ingress, every instant computed by hand."""
import copy

import pandas as pd
import pytest

import testbed.data
from helpers import TWO_DEVICES, simulate, tiny_blobs, tiny_scenario
from testbed import scenario as sc
from testbed.engine import Engine
from testbed.selection import Selector


@pytest.fixture(autouse=True)
def blobs(monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)


def three_devices(B: float, network: dict | None) -> dict:
    """Three devices, one group each (20 samples each: the same compute), no latency; rates in payloads B/s."""
    raw = tiny_scenario({"name": "fedavg"}, rounds=1)
    base = copy.deepcopy(TWO_DEVICES["fleet"]["groups"][0]) | {"latency_s": 0.0}
    rates = [(1.0, 1.0), (4.0, 4.0), (1.25, 4.0)]   # (down, up) in B/s
    raw["fleet"] = {"groups": [base | {"down_Bps": d * B, "up_Bps": u * B} for d, u in rates]}
    raw["round"] = {"clients_per_round": 3}
    return raw | ({"network": network} if network else {})


def payload() -> float:
    records, _ = simulate(three_devices(1000.0, None))
    assert records[0]["bytes_down"] == records[0]["bytes_up"]
    return records[0]["bytes_down"] / 3


def test_three_transfers_through_a_cell_and_the_server_by_hand():
    B = payload()
    network = {"cells": [{"down_Bps": 4 * B, "up_Bps": 10 * B, "groups": [0, 1, 2]}], "server": {"up_Bps": 2 * B}}
    records, events = simulate(three_devices(B, network))
    ev = pd.DataFrame(events)
    end = {(d, p): e for d, p, e in zip(ev["device"], ev["phase"], ev["end_s"])}
    compute = ev[ev["phase"] == "compute"]
    c = (compute["end_s"] - compute["start_s"]).tolist()
    assert c[0] == pytest.approx(c[1], abs=1e-15) and c[0] == pytest.approx(c[2], abs=1e-15)
    c = c[0]
    # Downloads share the cell's 4B: caps B (device 0), 4B (1), 1.25B (2). Max-min: device 0 at its cap B, then
    # 3B for two: 1.5 each, device 2 capped at 1.25, device 1 gets 1.75. Device 1 ends at 1/1.75 = 4/7; the other
    # two then run at their caps (2.25B < 4B), never slowed: device 2 at 1/1.25 = 0.8, device 0 at 1.
    assert end[(1, "download")] == pytest.approx(4 / 7, abs=1e-9)
    assert end[(2, "download")] == 0.8 and end[(0, "download")] == 1.0   # their private instants, bit for bit
    # Uploads (tau = t - c) through the server's 2B (the cell's 10B never binds), caps B, 4B, 4B:
    # 4/7: device 1 alone, 2B (the server binds). 0.8: device 2 joins, 1B each; device 1 has 1 - 2(0.8 - 4/7)
    # = 19/35 left. 1.0: device 0 joins, 2/3 B each (its cap B is above); device 1 has 12/35 left, device 2 28/35.
    # 1 + (12/35)/(2/3) = 53/35: device 1 ends; device 2 has 16/35 left, device 0 23/35; 1B each.
    # 53/35 + 16/35 = 69/35: device 2 ends; device 0 has 7/35 left, alone at its cap B: ends at 76/35.
    assert end[(1, "upload")] == pytest.approx(c + 53 / 35, abs=1e-9)
    assert end[(2, "upload")] == pytest.approx(c + 69 / 35, abs=1e-9)
    assert end[(0, "upload")] == pytest.approx(c + 76 / 35, abs=1e-9)
    row = records[0]
    assert row["t_end_s"] == end[(0, "upload")]
    assert row["bytes_down"] == row["bytes_up"] == 3 * B   # every transfer moved exactly its payload
    # the waits: device 1's download 4/7 - 1/4; uploads: each its span less its private B / cap
    waits = {1: 4 / 7 - 1 / 4 + (53 / 35 - 4 / 7) - 1 / 4, 2: (69 / 35 - 0.8) - 1 / 4, 0: (76 / 35 - 1) - 1}
    assert row["network_wait_s"] == pytest.approx(sum(waits.values()), abs=1e-9)
    assert row["network_wait_max_s"] == pytest.approx(max(waits.values()), abs=1e-9)
    assert row["contended_bytes"] == 4 * B   # device 1's download and the three uploads were slowed
    # the server's ingress carried the three uploads: its rate integrates to 3B
    links = pd.DataFrame(row["links"])
    server = links[(links["link"] == "server") & (links["direction"] == "up")]
    assert ((server["t_end_s"] - server["t_start_s"]) * server["Bps"]).sum() == pytest.approx(3 * B, rel=1e-12)
    assert server["Bps"].max() == pytest.approx(2 * B, rel=1e-12)


def test_links_that_never_bind_change_no_instant():
    B = payload()
    private = pd.DataFrame(simulate(three_devices(B, None))[1])
    network = {"cells": [{"down_Bps": 100 * B, "up_Bps": 100 * B, "groups": [0, 1, 2]}],
               "server": {"down_Bps": 100 * B, "up_Bps": 100 * B}}
    shared = pd.DataFrame(simulate(three_devices(B, network))[1])
    pd.testing.assert_frame_equal(shared[private.columns], private)
    assert (shared["waited_s"] == 0).all()


class Lowest(Selector):
    """Picks the lowest usable ids: which devices train is then known by hand."""

    def select(self, state, ctx, rng):
        return ctx.candidates[:ctx.n_select], state


def test_an_asynchronous_dispatch_shares_with_the_transfers_in_flight():
    B = payload()
    raw = three_devices(B, {"cells": [{"down_Bps": B, "up_Bps": 1000 * B, "groups": [0, 1, 2]}]})
    rates = [(1.0, 100.0, 0.0), (1.0, 100.0, 0.5), (1.0, 100.0, 0.0)]   # (down, up) in B/s, latency
    raw["fleet"]["groups"] = [g | {"down_Bps": d * B, "up_Bps": u * B, "latency_s": lat}
                              for g, (d, u, lat) in zip(raw["fleet"]["groups"], rates)]
    raw |= {"protocol": {"kind": "async", "concurrency": 2, "buffer_size": 2}, "stop": {"max_rounds": 1}}
    raw.pop("round")
    exp = sc.build(sc.validate(raw, "test"))
    records, events = [], []
    engine = Engine(exp, lambda r, e: (records.append(r), events.extend(e)))
    engine.kit.participation.selector = Lowest()
    engine.run()
    ev = pd.DataFrame(events)
    end = {(n, p): e for n, p, e in zip(ev["task"], ev["phase"], ev["end_s"])}   # by task number
    c = end[(1, "compute")] - end[(1, "download")]
    # The cell's downlink is B; every cap is B. Tasks 1 (device 0) and 2 (device 1) are dispatched at 0; device 1
    # waits its 0.5 s latency. [0, 0.5): task 1 alone at B, 0.5B moved; then B/2 each: task 1's download ends at
    # 1.5, task 2's has moved 0.5B. Task 1 computes and uploads 1B at 100B/s: arrives at t2 = 1.5 + c + 0.01, when
    # task 3 is dispatched to the lowest idle device, 0 again. Task 2's download, alone at B from 1.5, has
    # 0.5 - (t2 - 1.5) = 2 - t2 left at t2; shared again, B/2 each: it ends at t2 + 2 (2 - t2) = 4 - t2; task 3's
    # has then moved 2 - t2 and goes on alone at B: it would end at (4 - t2) + 1 - (2 - t2) = 3. Task 2 uploads
    # after its 0.5 s latency: arrives at 4 - t2 + c + 0.51 = 3 (the buffer of 2 is full: the run's one
    # aggregation), which cuts task 3 as its download ends.
    t2 = 1.5 + c + 0.01
    assert end[(1, "download")] == pytest.approx(1.5, abs=1e-9)
    assert end[(1, "upload")] == pytest.approx(t2, abs=1e-9)
    assert end[(2, "download")] == pytest.approx(4 - t2, abs=1e-9)   # planned at 2.0 first, then again at t2
    assert end[(2, "upload")] == pytest.approx(4 - t2 + c + 0.51, abs=1e-9)
    assert end[(3, "download")] == pytest.approx(3.0, abs=1e-9)
    assert ev.loc[ev["task"] == 3, "device"].tolist() == [0] and records[0]["t_end_s"] == end[(2, "upload")]
    assert records[0]["bytes_up"] == 2 * B   # the two updates aggregated


def _tables(run) -> dict[str, bytes]:
    return {name: (run / name).read_bytes() for name in ("rounds.csv", "events.csv", "links.csv")}


def test_shared_links_through_drops_and_a_resume(tmp_path):
    """Devices that come and go (drops mid-transfer free their share) under FedBuff through one cell: a run killed
    between checkpoints resumes to the tables of an unbroken run, links.csv included."""
    from helpers import run_killed_after
    from testbed import checkpoint
    from testbed.runner import run_scenario

    B = payload()
    raw = three_devices(B, {"cells": [{"down_Bps": 1.5 * B, "up_Bps": 1.5 * B, "groups": [0, 1, 2]}],
                            "server": {"up_Bps": 2 * B}})
    for group in raw["fleet"]["groups"]:
        group["availability"] = {"kind": "markov", "mean_on_s": 3, "mean_off_s": 1}
    raw |= {"protocol": {"kind": "async", "concurrency": 2, "buffer_size": 2}, "stop": {"max_rounds": 24},
            "checkpoint": {"every_rounds": 4}}
    raw.pop("round")
    reference, summary = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "unbroken", quiet=True)
    rounds = pd.read_csv(reference / "rounds.csv")
    events = pd.read_csv(reference / "events.csv")
    cut = events[(events["phase"].isin(["download", "upload"])) & (events["outcome"] == "dropped")
                 & (events["end_s"] > events["start_s"])]
    assert len(cut) and (rounds["network_wait_s"] > 0).any()   # transfers cut by a drop, and contention
    run_killed_after(raw, tmp_path / "broken", 10)
    run = tmp_path / "broken" / "tiny" / "0"
    assert checkpoint.load(run, (run / "scenario.resolved.yaml").read_text()).round == 8
    assert run_scenario(sc.validate(raw, "test"), "test", tmp_path / "broken", quiet=True, resume=True) == (
        run, summary)
    assert _tables(run) == _tables(reference)


def test_energy_follows_the_contended_duration():
    # the round of the first test, with energy: device 1's download took 4/7 s where its own link alone takes 1/4
    import devices

    B = payload()
    raw = three_devices(B, {"cells": [{"down_Bps": 4 * B, "up_Bps": 10 * B, "groups": [0, 1, 2]}],
                            "server": {"up_Bps": 2 * B}})
    raw["resources"] = {"energy": True}
    records, events = simulate(raw)
    ev = pd.DataFrame(events)
    download = ev[(ev["device"] == 1) & (ev["phase"] == "download")].iloc[0]
    assert download["energy_J"] == pytest.approx(devices.CATALOG["raspberry_pi_4"].down_W * 4 / 7, rel=1e-9)


def test_power_of_choices_probes_share_the_links_too():
    # the three devices probed before the round (d = 3): each probe downloads the model (B bytes) through the cell
    # as the round's downloads do, so the same shares and the same instants: 4/7, 0.8, 1 from the round's start
    B = payload()
    raw = three_devices(B, {"cells": [{"down_Bps": 4 * B, "up_Bps": 10 * B, "groups": [0, 1, 2]}],
                            "server": {"up_Bps": 2 * B}})
    raw["selection"] = {"name": "power_of_choice", "options": {"d": 3}}
    _, events = simulate(raw)
    ev = pd.DataFrame(events)
    probes = ev[(ev["outcome"] == "probe") & (ev["phase"] == "download")].set_index("device")["end_s"]
    assert probes[1] == pytest.approx(4 / 7, abs=1e-9) and probes[2] == 0.8 and probes[0] == 1.0
