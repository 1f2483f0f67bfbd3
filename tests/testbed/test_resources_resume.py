"""Resources across protocols and checkpoints: a run with batteries, fluctuating rates and energy accounting,
killed between checkpoints and resumed, ends with the tables of a run never stopped (battery levels are in the
checkpoint); the energy of every round is the sum of its phases, sync and async alike."""
import math

import pandas as pd
import pytest
from helpers import run_killed_after, tiny_blobs, tiny_scenario

import testbed.data
from testbed import checkpoint
from testbed import scenario as sc
from testbed.runner import run_scenario

TABLES = ("rounds.csv", "events.csv", "battery.csv")


@pytest.fixture(autouse=True)
def _tiny_data(monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)


def _with_resources(raw: dict) -> dict:
    """Both devices on batteries that a few tasks empty (1.8 J, 6 W of compute over a 1-3 s task), charging 10 s in
    every 30 s; device 0 throttled at random, device 1's link busy on a Markov schedule; Markov availability."""
    for group in raw["fleet"]["groups"]:
        group |= {"train_W": 6.0, "up_W": 1.5, "down_W": 1.0, "idle_W": 0.25,
                  "availability": {"kind": "markov", "mean_on_s": 20, "mean_off_s": 4},
                  "battery": {"capacity_Wh": 0.0005, "initial_level": {"low": 0.3, "high": 1.0}, "min_level": 0.25,
                              "charge_W": 0.5, "charging": {"kind": "markov", "mean_on_s": 10, "mean_off_s": 20}}}
    raw["fleet"]["groups"][0]["speed"] = {"kind": "markov", "factor": 0.5, "mean_normal_s": 5, "mean_slow_s": 3}
    raw["fleet"]["groups"][1]["bandwidth"] = {"kind": "markov", "factor": 0.25, "mean_normal_s": 4,
                                              "mean_slow_s": 2}
    return raw | {"resources": {"energy": True}, "checkpoint": {"every_rounds": 4}}


def _tables(run) -> list[bytes]:
    return [(run / t).read_bytes() for t in TABLES]


SCENARIOS = {
    "sync": lambda: tiny_scenario({"name": "fedavg"}, rounds=30),
    "async": lambda: tiny_scenario({"name": "fedavg"}, rounds=30) | {
        "protocol": {"kind": "async", "concurrency": 2, "buffer_size": 1}, "round": None},
}


@pytest.mark.parametrize("protocol", sorted(SCENARIOS))
def test_a_run_with_resources_killed_between_checkpoints_resumes_to_the_same_tables(protocol, tmp_path):
    raw = _with_resources(SCENARIOS[protocol]())
    if raw.get("round", 0) is None:
        raw.pop("round")
    reference, summary = run_scenario(sc.validate(raw, "test"), "test", tmp_path / "unbroken", quiet=True)
    rounds = pd.read_csv(reference / "rounds.csv")
    # the batteries matter: tasks dropped when one empties, devices refusing work below their minimum
    assert rounds["depleted"].sum() > 0 and rounds["excluded_battery"].sum() > 0, rounds
    run_killed_after(raw, tmp_path / "broken", 10)
    run = tmp_path / "broken" / "tiny" / "0"
    saved = checkpoint.load(run, (run / "scenario.resolved.yaml").read_text())
    assert saved.round == 8 and "batteries" in saved.resources
    assert run_scenario(sc.validate(raw, "test"), "test", tmp_path / "broken", quiet=True, resume=True) == (
        run, summary)
    assert _tables(run) == _tables(reference)


@pytest.mark.parametrize("protocol", sorted(SCENARIOS))
def test_every_rounds_energy_is_the_sum_of_its_phases(protocol, tmp_path):
    raw = _with_resources(SCENARIOS[protocol]())
    if raw.get("round", 0) is None:
        raw.pop("round")
    run, summary = run_scenario(sc.validate(raw, "test"), "test", tmp_path, quiet=True)
    rounds, events = pd.read_csv(run / "rounds.csv"), pd.read_csv(run / "events.csv")
    per_round = events.groupby("round")["energy_J"].apply(math.fsum)
    assert per_round.reindex(rounds["round"], fill_value=0.0).to_numpy() == pytest.approx(
        rounds["energy_J"].to_numpy(), rel=1e-12)
    wasted = events[events["outcome"] != "done"].groupby("round")["energy_J"].apply(math.fsum)
    assert wasted.reindex(rounds["round"], fill_value=0.0).to_numpy() == pytest.approx(
        rounds["wasted_energy_J"].to_numpy(), rel=1e-12)
    assert summary["energy_J_total"] == pytest.approx(math.fsum(events["energy_J"]), rel=1e-12)
    # a phase's joules are its duration times its watts
    watts = events["phase"].map({"download": 1.0, "compute": 6.0, "upload": 1.5})
    assert events["energy_J"].to_numpy() == pytest.approx(((events["end_s"] - events["start_s"]) * watts).to_numpy(),
                                                          rel=1e-9)
