"""The worked examples of docs/extending.md (examples/), run as a user would, so that the docs cannot rot."""
import json
import sys

import pandas as pd
import pytest
import torch

from helpers import ROOT
from testbed.algorithms.base import Arrival, ServerState
from testbed.cli import main
from testbed.local import LocalSGD

EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def fednova():
    sys.path.append(str(EXAMPLES))
    import fednova

    yield fednova
    sys.path.remove(str(EXAMPLES))


def test_fednova_aggregates_as_by_hand(fednova):
    """Devices with 10 and 25 samples, batches of 10, one epoch: tau = 1 and 3 steps, p = 10/35 and 25/35,
    tau_eff = 10/35 + 3 * 25/35 = 85/35; x + tau_eff (p1 D1 / 1 + p2 D2 / 3) with D1 = 1, D2 = 2 at x = 0.5:
    0.5 + (85/35) (10/35 + 50/105) = 0.5 + 850/1225 + 4250/3675 = 2.35034..."""
    strategy = fednova.FedNova(LocalSGD(lr=0.1, local_epochs=1, batch_size=10))
    state = ServerState({"w": torch.tensor([0.5])})
    arrivals = [Arrival(0, 10, {"w": torch.tensor([1.0])}, {"train_loss": 1.0}),
                Arrival(1, 25, {"w": torch.tensor([2.0])}, {"train_loss": 2.0})]
    new, metrics = strategy.aggregate(state, 1, arrivals, [])
    assert new.params["w"].item() == pytest.approx(0.5 + 850 / 1225 + 4250 / 3675, rel=1e-6)
    assert metrics["train_loss"] == pytest.approx((10 * 1.0 + 25 * 2.0) / 35)


def test_fednova_refuses_momentum_in_one_line(tmp_path, capsys):
    assert main(["run", str(EXAMPLES / "fednova.yaml"), "--out", str(tmp_path), "--quiet",
                 "--set", "client.momentum=0.9"]) == 2
    assert "refused its options (ValueError: FedNova's plain-SGD rule needs client.momentum: 0)" in capsys.readouterr().err


def _run(tmp_path, *sets):
    assert main(["run", str(EXAMPLES / "fednova.yaml"), "--out", str(tmp_path), "--quiet",
                 "--set", "stop.max_rounds=3", *[a for s in sets for a in ("--set", s)]]) == 0
    run = next(tmp_path.glob("*/0"))
    return pd.read_csv(run / "rounds.csv"), json.loads((run / "summary.json").read_text())


def test_the_example_scenario_runs_from_anywhere(tmp_path, monkeypatch):
    """Its algorithm, model and dataset are modules beside the scenario, found from another folder too."""
    monkeypatch.chdir(tmp_path)
    rounds, summary = _run(tmp_path / "runs")
    assert len(rounds) == 3 and summary["status"] == "completed" and rounds["accuracy"].iloc[-1] > 0.5


def test_fednova_with_equal_steps_is_fedavg(tmp_path):
    """With local_steps fixed every device runs the same tau, so FedNova's weights are FedAvg's p_i."""
    nova, _ = _run(tmp_path / "nova", "client.local_steps=4")
    avg, _ = _run(tmp_path / "avg", "client.local_steps=4", "algorithm.name=fedavg")
    assert (nova["accuracy"] == avg["accuracy"]).all()
    assert nova["loss"].to_numpy() == pytest.approx(avg["loss"].to_numpy(), rel=1e-5)
    assert (nova["t_end_s"] == avg["t_end_s"]).all()


def test_the_python_example_compares_fednova_and_fedavg(tmp_path, monkeypatch, capsys):
    """examples/compare_from_python.py, as a user runs it (3 rounds): both runs through testbed.run."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import compare_from_python

    runs = compare_from_python.compare(3, str(tmp_path))
    assert {name: run.scenario["algorithm"]["name"] for name, run in runs.items()} == {
        "fednova": "fednova:FedNova", "fedavg": "fedavg"}
    assert all(len(run.rounds) == 3 and run.summary["status"] == "completed" for run in runs.values())


NOTEBOOK = '''
from dataclasses import dataclass, field

import testbed
from testbed.algorithms.base import ServerState, Strategy
from testbed.local import LocalSGD
from testbed.payload import Dense


@dataclass(frozen=True)
class Frozen(Strategy):
    """A strategy defined where it is used, as in a notebook: the model never moves."""
    client: LocalSGD
    down: Dense = field(default_factory=Dense)
    up: Dense = field(default_factory=Dense)

    def aggregate(self, state, round, arrivals, failures):
        return state, {"train_loss": 0.0}


scenario = testbed.validate(SCENARIO).model_dump(mode="json")
run = testbed.run(scenario | {"algorithm": {"name": "__main__:Frozen"}}, out=OUT, quiet=True, plots=False,
                  set={"stop.max_rounds": 2})
print(run.rounds["accuracy"].nunique(), run.scenario["algorithm"]["name"])
'''


@pytest.mark.slow
def test_a_strategy_defined_in_the_running_script_is_main_colon_name(tmp_path):
    """As in a notebook: the class lives in __main__, and the scenario names it "__main__:Frozen"."""
    import subprocess

    script = tmp_path / "notebook.py"
    script.write_text(NOTEBOOK.replace("SCENARIO", repr(str(EXAMPLES / "fednova.yaml"))).replace(
        "OUT", repr(str(tmp_path / "runs"))))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "__main__:Frozen"]


@pytest.mark.slow
def test_the_least_trained_selector_gives_every_device_a_turn(tmp_path, monkeypatch):
    """quickstart's 60 phones always on, 10 a round for 4 rounds: least_trained trains 40 distinct devices,
    where uniform draws some twice."""
    monkeypatch.chdir(EXAMPLES)
    always_on = [f"fleet.groups.{g}.availability={{kind: always_on}}" for g in range(3)]
    trained = {}
    for name in ("uniform", "least_trained:LeastTrained"):
        assert main(["run", str(ROOT / "scenarios" / "quickstart.yaml"), "--out", str(tmp_path / name), "--quiet",
                     *[a for s in ["stop.max_rounds=4", "round.overcommit=1", "round.deadline_s=null",
                                   f"selection.name={name}", *always_on] for a in ("--set", s)]]) == 0
        events = pd.read_csv(next((tmp_path / name).glob("*/0")) / "events.csv")
        trained[name] = events[(events["phase"] == "upload") & (events["outcome"] == "done")].groupby("device").size()
    assert len(trained["least_trained:LeastTrained"]) == 40 and trained["least_trained:LeastTrained"].max() == 1
    assert trained["uniform"].max() >= 2


def test_the_tracked_study_of_docs_tracking_runs_two_rounds(tmp_path, capsys):
    """examples/tracked_study.yaml (docs/tracking.md): Flower's DirichletPartitioner on the quickstart's fleet."""
    pytest.importorskip("flwr_datasets")
    assert main(["run", str(EXAMPLES / "tracked_study.yaml"), "--set", "stop.max_rounds=2", "--out", str(tmp_path),
                 "--quiet"]) == 0
    resolved = (tmp_path / "tracked_study" / "0" / "scenario.resolved.yaml").read_text()
    assert "kind: flwr" in resolved and "name: DirichletPartitioner" in resolved
    assert len(pd.read_csv(tmp_path / "tracked_study" / "0" / "rounds.csv")) == 2
