"""Flower strategies through the adapter (testbed/algorithms/flower.py): the same model as our own algorithms where
their rules are the same, the same clock, failures reported to the strategy, determinism, and one-line refusals."""
import copy
import math
import random
import subprocess
import sys
from functools import lru_cache

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

flwr = pytest.importorskip("flwr")

from flwr.common.constant import ErrorCode  # noqa: E402
from helpers import ROOT, run_killed_after  # noqa: E402

from testbed import scenario as sc  # noqa: E402
from testbed.engine import Engine  # noqa: E402
from testbed.errors import TestbedError  # noqa: E402
from testbed.runner import run_scenario  # noqa: E402

MESSAGE, LEGACY = "flwr.serverapp.strategy", "flwr.server.strategy"

# scenarios/flower_fedadam.yaml's fleet, shortened: 3 rounds of one epoch, low-end phones online ~1 s at a time
# and a 0.6 s deadline, so that every kind of failure occurs (dropped, late, surplus: test below)
RAW = yaml.safe_load((ROOT / "scenarios/flower_fedadam.yaml").read_text())
RAW["fleet"]["groups"][1]["availability"] = {"kind": "markov", "mean_on_s": 1.0, "mean_off_s": 1.0}
RAW |= {"round": {"clients_per_round": 8, "overcommit": 1.25, "deadline_s": 0.6}, "stop": {"max_rounds": 3}}
RAW["client"]["local_epochs"] = 1


def scenario(algorithm: dict, rounds: int = 3) -> dict:
    raw = copy.deepcopy(RAW)
    raw["algorithm"], raw["stop"]["max_rounds"] = algorithm, rounds
    return raw


def flower(strategy: str, **options) -> dict:
    return {"name": "flower", "strategy": strategy, "options": options}


def run(algorithm: dict, rounds: int = 3) -> tuple[pd.DataFrame, dict]:
    """The rounds table and the final global model of a run in-process."""
    exp = sc.build(sc.validate(scenario(algorithm, rounds), "test"))
    INITIAL.update({n: p.detach().clone() for n, p in exp.model.named_parameters()})
    records, checkpoints = [], []
    Engine(exp, lambda record, events: records.append(record), checkpoints.append).run()
    return pd.DataFrame(records), checkpoints[-1].state.params


INITIAL = {}  # the initial model (the same for every run of the scenario)


@lru_cache(maxsize=None)
def ours(algorithm: str) -> tuple[pd.DataFrame, dict]:
    return run(yaml.safe_load(algorithm))


# Flower's strategy and options, and ours with the same rule. FedAdam: Flower's bias-corrects its step,
# eta * sqrt(1 - beta_2^(t+1)) / (1 - beta_1^(t+1)), and starts v at 0; ours does not correct and starts v at
# tau^2. With beta_1 = beta_2 = 0 both are x + eta * D / (|D| + tau) (test_fedadam_step_is_bias_corrected shows
# the difference otherwise).
SAME_RULE = [
    (flower(f"{MESSAGE}:FedAvg"), {"name": "fedavg"}),
    (flower(f"{LEGACY}:FedAvg"), {"name": "fedavg"}),
    (flower(f"{MESSAGE}:FedAdam", eta=0.01, beta_1=0.0, beta_2=0.0, tau=1e-3),
     {"name": "fedadam", "server_lr": 0.01, "beta1": 0.0, "beta2": 0.0, "tau": 1e-3}),
    (flower(f"{LEGACY}:FedAdam", eta=0.01, beta_1=0.0, beta_2=0.0, tau=1e-3),
     {"name": "fedadam", "server_lr": 0.01, "beta1": 0.0, "beta2": 0.0, "tau": 1e-3}),
    (flower(f"{MESSAGE}:FedAvgM", server_learning_rate=1.0, server_momentum=0.5),
     {"name": "fedavgm", "server_lr": 1.0, "server_momentum": 0.5}),
    (flower(f"{MESSAGE}:FedProx", proximal_mu=0.1), {"name": "fedprox", "mu": 0.1}),
    (flower(f"{LEGACY}:FedProx", proximal_mu=0.1), {"name": "fedprox", "mu": 0.1}),
]


def label(strategy: str) -> str:
    """flwr.serverapp.strategy:FedAvg -> message:FedAvg; flwr.server.strategy:FedAvg -> legacy:FedAvg."""
    module, _, name = strategy.partition(":")
    return f"{'message' if module == MESSAGE else 'legacy'}:{name}"


@pytest.mark.parametrize("theirs, same", SAME_RULE, ids=[label(theirs["strategy"]) for theirs, _ in SAME_RULE])
def test_flower_strategy_gives_our_model_on_our_clock(theirs, same):
    rounds, params = run(theirs)
    our_rounds, our_params = ours(yaml.safe_dump(same))
    assert rounds["t_end_s"].tolist() == our_rounds["t_end_s"].tolist()
    columns = ["selected", "arrived", "dropped", "late", "surplus", "bytes_up", "bytes_down", "flops"]
    assert rounds[columns].equals(our_rounds[columns])
    assert max(float((params[n] - our_params[n]).abs().max()) for n in params) < 1e-6
    assert np.allclose(rounds["train_loss"], our_rounds["train_loss"], rtol=1e-6, atol=0)
    assert max(float((params[n] - INITIAL[n]).abs().max()) for n in params) > 0.01  # the model did move


def adapter_of(reference: str, **options):
    """The adapter around a Flower strategy, as the scenario's `algorithm: {name: flower}` builds it."""
    from testbed.algorithms.flower import FlowerStrategy
    from testbed.local import LocalSGD
    from testbed.schema.algorithms.flower import flower_strategy_class

    return FlowerStrategy(LocalSGD(lr=0.1), reference, options, flower_strategy_class(reference))


def context(round: int, online: list[int], n_select: int):
    from testbed.algorithms.base import RoundContext, select_uniform

    return RoundContext(round, np.array(online), n_select, np.array([10, 20, 30]), None, np.random.default_rng(0),
                        selected=select_uniform(np.array(online), n_select, np.random.default_rng(1)))


def test_fedadam_step_is_bias_corrected_from_zero_v():
    """One aggregation of Flower's FedAdam with its defaults (beta_1 0.9, beta_2 0.99) through the adapter, against
    Reddi et al.'s step as Flower writes it, by hand: and against ours, which differs by the bias correction."""
    from testbed import rules
    from testbed.algorithms.base import Arrival, Failure

    adapter = adapter_of(f"{MESSAGE}:FedAdam", eta=0.1, tau=1e-3)
    x = torch.tensor([1.0, -2.0, 0.5])
    state = adapter.init({"w": x})
    ctx = context(1, [0, 1, 2], 3)
    assert [t.device for t in adapter.configure(state, ctx, np.random.default_rng(1))] == [0, 1, 2]
    updates = {0: torch.tensor([0.3, 0.0, -0.1]), 1: torch.tensor([0.6, -0.3, 0.2])}
    arrivals = [Arrival(d, n, {"w": updates[d]}, {"train_loss": 1.0, "train_accuracy": 0.5})
                for d, n in ((0, 10), (1, 20))]
    new, metrics = adapter.aggregate(state, 1, arrivals, [Failure(2, "late")])
    # D = (10 u0 + 20 u1) / 30 = [0.5, -0.2, 0.1]; m = 0.1 D; v = 0.01 D^2; round 1: eta_norm = eta sqrt(1 - 0.99^2)
    # / (1 - 0.9^2) = 0.1 * 0.141067 / 0.19
    eta_norm = 0.1 * math.sqrt(1 - 0.99**2) / (1 - 0.9**2)
    by_hand = [xi + eta_norm * 0.1 * d / (math.sqrt(0.01 * d * d) + 1e-3)
               for xi, d in zip([1.0, -2.0, 0.5], [0.5, -0.2, 0.1])]
    assert new.params["w"].tolist() == pytest.approx(by_hand, abs=1e-6)
    assert metrics == {"train_loss": 1.0}
    # ours: no bias correction, v from tau^2: x + 0.1 * 0.1 D / (sqrt(0.99 tau^2 + 0.01 D^2) + tau)
    ours, _, _ = rules.server_adam(x, torch.tensor([0.5, -0.2, 0.1]), torch.zeros(3), torch.full((3,), 1e-6),
                                   0.1, 0.9, 0.99, 1e-3)
    ratio = (new.params["w"] - x) / (ours - x)  # Flower's step / ours: about its bias correction, 0.742
    assert ratio.tolist() == pytest.approx([eta_norm / 0.1] * 3, rel=0.01)


@pytest.mark.parametrize("api", [MESSAGE, LEGACY], ids=["message", "legacy"])
def test_a_cohort_below_the_strategys_minimum_trains_nobody(api):
    """FedAvg waits for 2 nodes (min_train_nodes, min_fit_clients): a round with one device online trains nobody
    (Flower would wait; the clock cannot), and the model stays; a round that can never offer 2 is refused."""
    adapter = adapter_of(f"{api}:FedAvg")
    x = {"w": torch.tensor([1.0, 2.0])}
    state = adapter.init(x)
    assert adapter.configure(state, context(1, [2], 2), np.random.default_rng(1)) == []
    new, metrics = adapter.aggregate(state, 1, [], [])
    assert torch.equal(new.params["w"], x["w"]) and metrics == {}
    assert [t.device for t in adapter.configure(new, context(2, [0, 2], 2), np.random.default_rng(1))] == [0, 2]
    fresh = adapter_of(f"{api}:FedAvg")
    with pytest.raises(TestbedError, match=r"algorithm.options: .*:FedAvg waits for 2 nodes .* at most 1 "):
        fresh.configure(fresh.init(x), context(1, [0, 1, 2], 1), np.random.default_rng(1))


def test_work_the_testbed_cannot_carry_is_refused_in_one_line():
    """A strategy that sends a device other arrays than the global model (our downlink carries the model), or sends
    work to a node outside the round's cohort (the testbed chooses who trains)."""
    from flwr.app import ArrayRecord, Message, RecordDict
    from flwr.serverapp.strategy import FedAvg

    from testbed.algorithms.flower import FlowerStrategy
    from testbed.local import LocalSGD

    class Personal(FedAvg):
        def configure_train(self, server_round, arrays, config, grid):
            return [Message(RecordDict({"arrays": ArrayRecord({"w": torch.zeros(2)}), "config": config}),
                            node, "train") for node in grid.get_node_ids()]

    class Elsewhere(FedAvg):
        def configure_train(self, server_round, arrays, config, grid):
            return [Message(RecordDict({"arrays": arrays, "config": config}), 99, "train")]

    for cls, message in ((Personal, "sends devices arrays other than the global model"),
                         (Elsewhere, r"sent work to devices outside the round's cohort \(\[99\]\)")):
        adapter = FlowerStrategy(LocalSGD(lr=0.1), f"mine:{cls.__name__}", {}, cls)
        with pytest.raises(TestbedError, match=f"algorithm.strategy: mine:{cls.__name__} {message}"):
            adapter.configure(adapter.init({"w": torch.ones(2)}), context(1, [0, 1, 2], 3), np.random.default_rng(1))


@pytest.mark.parametrize("api", [MESSAGE, LEGACY], ids=["message", "legacy"])
def test_dropped_late_and_surplus_devices_reach_the_strategy_as_failures(api, monkeypatch):
    seen = []
    if api == MESSAGE:
        from flwr.serverapp.strategy import FedAvg

        def record(self, server_round, replies):
            replies = list(replies)
            seen.append((sum(not r.has_error() for r in replies),
                         sorted(r.error.code for r in replies if r.has_error())))
            return aggregate(self, server_round, replies)

        aggregate = FedAvg.aggregate_train
        monkeypatch.setattr(FedAvg, "aggregate_train", record)
    else:
        from flwr.server.strategy import FedAvg

        def record(self, server_round, results, failures):
            seen.append((len(results), sorted(ErrorCode.NODE_UNAVAILABLE if f.reason == "dropped" else
                                              ErrorCode.REPLY_MESSAGE_UNAVAILABLE for f in failures)))
            return aggregate(self, server_round, results, failures)

        aggregate = FedAvg.aggregate_fit
        monkeypatch.setattr(FedAvg, "aggregate_fit", record)
    rounds, _ = run(flower(f"{api}:FedAvg"))
    assert rounds[["dropped", "late", "surplus"]].sum().tolist() == [4, 3, 2]  # every kind occurs
    for (arrived, codes), (_, row) in zip(seen, rounds.iterrows(), strict=True):
        assert arrived == row["arrived"]
        assert codes.count(ErrorCode.NODE_UNAVAILABLE) == row["dropped"]
        assert codes.count(ErrorCode.REPLY_MESSAGE_UNAVAILABLE) == row["late"] + row["surplus"]


def test_same_seed_same_tables_and_flowers_sampling_is_seeded():
    """FedAdam with fraction_train 0.5: Flower samples half the cohort with Python's `random`, seeded from the
    strategy stream (and the caller's random state left as it was): two runs give the same table."""
    algorithm = flower(f"{MESSAGE}:FedAdam", eta=0.01, fraction_train=0.5)
    before = random.getstate()
    first, params = run(algorithm)
    assert random.getstate() == before
    second, params_again = run(algorithm)
    assert first.equals(second) and all(torch.equal(params[n], params_again[n]) for n in params)
    assert first["selected"].tolist() == [5, 5, 5]  # half of each round's cohort of 10


def test_resume_is_refused_in_one_line(tmp_path):
    raw = scenario(flower(f"{MESSAGE}:FedAdam")) | {"checkpoint": {"every_rounds": 1}}
    run_killed_after(raw, tmp_path, 2)
    with pytest.raises(TestbedError, match="--resume: a Flower strategy keeps its state") as err:
        run_scenario(sc.validate(raw, "test"), "test", tmp_path, quiet=True, resume=True)
    assert "\n" not in str(err.value)


BAD = [
    ({"strategy": "flwr.serverapp.strategy:FedAvgg"}, "algorithm.strategy: 'flwr.serverapp.strategy:FedAvgg': "
     "flwr.serverapp.strategy has no attribute 'FedAvgg'; did you mean 'FedAvg'?"),
    ({"strategy": "no_such_package_xyz:FedAvg"}, "algorithm.strategy: 'no_such_package_xyz:FedAvg': no module "
     "'no_such_package_xyz'"),
    ({"strategy": "FedAvg"}, "algorithm.strategy: 'FedAvg' is not a reference; write 'package.module:attribute'"),
    ({"strategy": "collections:OrderedDict"}, "algorithm.strategy: collections:OrderedDict is not a Flower strategy"),
    ({"strategy": "flwr.serverapp.strategy:Strategy"}, "algorithm.strategy: flwr.serverapp.strategy:Strategy is "
                                                       "abstract"),
    ({"options": {"etaa": 0.1}}, "algorithm.options: FedAdam does not take these options (got an unexpected "
                                 "keyword argument 'etaa'); it takes: fraction_train"),
    ({"strategy": f"{LEGACY}:FedProx"}, "algorithm.options: FedProx does not take these options (missing a required "
                                        "argument: 'proximal_mu')"),
    ({"protocol": {"kind": "async", "concurrency": 5, "buffer_size": 3}}, "protocol: flower cannot run "
                                                                          "asynchronously"),
]


@pytest.mark.parametrize("change, message", BAD, ids=range(len(BAD)))
def test_bad_config_ends_in_one_line(change, message):
    raw = scenario(flower(f"{MESSAGE}:FedAdam"))
    raw["algorithm"] |= {k: v for k, v in change.items() if k != "protocol"}
    raw |= {k: v for k, v in change.items() if k == "protocol"}
    with pytest.raises(TestbedError) as err:
        sc.validate(raw, "x.yaml")
    assert str(err.value).startswith(f"x.yaml: {message}") and "\n" not in str(err.value), str(err.value)


def test_without_flower_the_fix_is_to_install_it(monkeypatch):
    for module in ("flwr", "flwr.serverapp", "flwr.serverapp.strategy"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(TestbedError, match=r"algorithm.strategy: cannot import flwr.serverapp.strategy: Flower is not installed; "
                                           r"pip install flwr"):
        sc.validate(scenario(flower(f"{MESSAGE}:FedAdam")), "x.yaml")


def test_flower_is_imported_only_by_a_scenario_that_names_it():
    code = ("import sys; from testbed import scenario as sc; from testbed.engine import Engine; "
            "sc.load('scenarios/digits.yaml'); assert 'flwr' not in sys.modules, 'imported'; "
            "sc.load('scenarios/flower_fedadam.yaml'); assert 'flwr' in sys.modules")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env={"PYTHONPATH": str(ROOT)})


# Every Flower 1.42 strategy that runs through the adapter, with the options it needs (README, "Flower
# strategies"); those that do not, and why, are listed there.
RUNS = [(f"{MESSAGE}:{name}", options) for name, options in [
    ("FedAvg", {}), ("FedProx", {"proximal_mu": 0.1}), ("FedAvgM", {"server_momentum": 0.9}),
    ("FedAdagrad", {"eta": 0.01}), ("FedAdam", {"eta": 0.01}), ("FedYogi", {"eta": 0.01}),
    ("FedTrimmedAvg", {"beta": 0.2}), ("FedMedian", {}), ("Krum", {"num_malicious_nodes": 1}),
    ("MultiKrum", {"num_malicious_nodes": 1, "num_nodes_to_select": 3}), ("Bulyan", {"num_malicious_nodes": 1}),
    ("QFedAvg", {"client_learning_rate": 0.05}), ("FedXgbCyclic", {})]] + \
    [(f"{LEGACY}:{name}", options) for name, options in [
        ("FedAvg", {}), ("FaultTolerantFedAvg", {}), ("FedProx", {"proximal_mu": 0.1}),
        ("FedAvgM", {"server_momentum": 0.9}), ("FedOpt", {}), ("FedAdagrad", {"eta": 0.01}),
        ("FedAdam", {"eta": 0.01}), ("FedYogi", {"eta": 0.01}), ("FedTrimmedAvg", {"beta": 0.2}), ("FedMedian", {}),
        ("Krum", {"num_malicious_clients": 1}),
        ("Bulyan", {"num_malicious_clients": 0, "to_keep": 0})]]  # to_keep: for its first rule, Krum


@pytest.mark.parametrize("strategy, options", RUNS, ids=[label(strategy) for strategy, _ in RUNS])
def test_flower_strategy_runs_two_rounds(strategy, options):
    rounds, params = run(flower(strategy, **options), rounds=2)
    assert len(rounds) == 2 and rounds["accuracy"].notna().iloc[-1]
    assert all(torch.isfinite(p).all() for p in params.values())
