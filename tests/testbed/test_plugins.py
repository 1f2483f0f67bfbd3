"""User code named from a scenario (testbed/plugins.py): algorithms, models and datasets by 'module:attribute'
reference or by a short name an installed package registers; the same one-line errors as built-ins."""
import sys
import textwrap

import pandas as pd
import pytest

from helpers import simulate, write_yaml
from testbed import plugins
from testbed.cli import main

USER_MODULE = '''
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from testbed.algorithms import FedAvg
from testbed.algorithms.base import ServerState, Strategy, weighted_mean
from testbed.data import Dataset
from testbed.local import LocalSGD
from testbed.payload import Dense


@dataclass(frozen=True)
class MyFedAvg(FedAvg):
    """Ours, subclassed: the same algorithm."""


@dataclass(frozen=True)
class Damped(Strategy):
    """x + step * (the sample-weighted mean update): step 0 never moves the model."""
    client: LocalSGD
    step: float = 0.5
    down: Dense = field(default_factory=Dense)
    up: Dense = field(default_factory=Dense)

    def __post_init__(self):
        if not 0 <= self.step <= 1:
            raise ValueError("step must be in [0, 1]")

    def aggregate(self, state, round, arrivals, failures):
        if not arrivals:
            return state, {}
        mean = weighted_mean([a.update for a in arrivals], [a.num_samples for a in arrivals])
        return ServerState({n: p + self.step * mean[n] for n, p in state.params.items()}), {"train_loss": 0.5}


@dataclass(frozen=True)
class NoAggregate(Strategy):
    client: LocalSGD


@dataclass(frozen=True)
class ShortConfigure(Damped):
    def configure(self, state, ctx):
        return []


def linear(sample_shape, num_classes, width):
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(math.prod(sample_shape), num_classes))


def two_arguments(sample_shape, num_classes):
    return linear(sample_shape, num_classes, 1.0)


def not_a_module(sample_shape, num_classes, width):
    return [1, 2]


def blobs(n=240, classes=3, seed=0):
    """n 4x4 one-channel images in `classes` Gaussian blobs; a fifth held out for testing."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    x = (rng.normal(size=(n, 1, 4, 4)) + y[:, None, None, None]).astype(np.float32)
    test = n // 5
    return Dataset("blobs", torch.from_numpy(x[test:]), torch.from_numpy(y[test:]), torch.from_numpy(x[:test]),
                   torch.from_numpy(y[:test]), classes)


@dataclass(frozen=True)
class Crashing(Damped):
    def aggregate(self, state, round, arrivals, failures):
        return 1 / 0


def broken(n=10):
    raise KeyError("no column 'label'")


def not_a_dataset():
    return "hello"


def float64_inputs():
    d = blobs()
    return Dataset("f64", d.train_x.double(), d.train_y, d.test_x, d.test_y, 3)


@dataclass(frozen=True)
class Fragile(Damped):
    def __post_init__(self):
        raise RuntimeError("no GPU here")
'''

FOUR_BOARDS = {
    "name": "plugins",
    "seed": 0,
    "data": {"name": "user_code:blobs", "partition": {"kind": "iid"}},
    "model": {"name": "user_code:linear"},
    "fleet": {"groups": [{"profile": "raspberry_pi_4", "count": 4}]},
    "round": {"clients_per_round": 4},
    "client": {"lr": 0.1, "local_epochs": 2, "batch_size": 8},
    "algorithm": {"name": "fedavg"},
    "stop": {"max_rounds": 2},
}


@pytest.fixture
def user_code(tmp_path, monkeypatch):
    """user_code.py in the current directory, importable as a user's module is when they run from its folder."""
    (tmp_path / "user_code.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "user_code", raising=False)  # this test's file, not an earlier test's
    yield tmp_path
    sys.modules.pop("user_code", None)


def run(folder, raw, *sets):
    folder.mkdir(exist_ok=True)
    assert main(["run", str(write_yaml(folder / "s.yaml", raw)), "--out", str(folder / "runs"), "--quiet",
                 *[a for s in sets for a in ("--set", s)]]) == 0
    run_dir = folder / "runs" / raw["name"] / "0"
    return pd.read_csv(run_dir / "rounds.csv"), (run_dir / "events.csv").read_bytes()


def test_a_subclass_of_our_fedavg_runs_exactly_as_fedavg(user_code):
    builtin_rounds, builtin_events = run(user_code / "a", FOUR_BOARDS)
    plugin_rounds, plugin_events = run(user_code / "b", FOUR_BOARDS, "algorithm.name=user_code:MyFedAvg")
    pd.testing.assert_frame_equal(builtin_rounds, plugin_rounds)
    assert builtin_events == plugin_events


def test_options_reach_the_strategy(user_code):
    """step 0: the model never moves, so every round scores as the initial model does."""
    rounds, _ = run(user_code, FOUR_BOARDS, "algorithm={name: user_code:Damped, options: {step: 0.0}}")
    assert rounds["accuracy"].nunique() == 1 and (rounds["train_loss"] == 0.5).all()


def test_a_user_model_has_its_flops_counted(user_code):
    """Linear(16 -> 3) is 48 multiply-adds a sample; training is 3x the forward pass; every device trains 2 epochs
    on its 48 samples (192 of them, iid over 4 devices), all 4 arrive: 3 * 48 * 2 * 192 FLOPs a round."""
    rounds, _ = run(user_code, FOUR_BOARDS)
    assert (rounds["flops"] == 3 * 48 * 2 * 192).all()


def test_a_registered_short_name_stands_for_its_reference(user_code):
    """An installed package's entry point: `algorithm: {name: damped}` once the package is installed."""
    info = user_code / "user_code-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: user-code\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[fl_edge_testbed.algorithms]\ndamped = user_code:Damped\n"
                                           "fedavg = user_code:Damped\n")
    plugins.registered.cache_clear()  # and again below, so that no other test sees this package
    try:
        assert plugins.registered("algorithm")["damped"] == "user_code:Damped"
        rounds, _ = run(user_code, FOUR_BOARDS, "algorithm={name: damped, options: {step: 0.0}}")
        assert rounds["accuracy"].nunique() == 1
        # a package cannot take a built-in's name: fedavg stays ours
        fedavg, _ = run(user_code / "f", FOUR_BOARDS, "algorithm.name=fedavg")
        assert fedavg["accuracy"].iloc[-1] != rounds["accuracy"].iloc[-1]
    finally:
        plugins.registered.cache_clear()


BAD = {
    "no module": ("algorithm.name=nomodule:X",
                  "algorithm.name: 'nomodule:X': no module 'nomodule' in the current directory"),
    "no attribute": ("algorithm.name=user_code:Dampd",
                     "algorithm.name: 'user_code:Dampd': user_code has no attribute 'Dampd'; did you mean 'Damped'?"),
    "not a reference": ("algorithm.name=user_code:a:b", "algorithm.name: 'user_code:a:b' is not a reference"),
    "not a strategy": ("algorithm.name=user_code:linear",
                       "algorithm.name: 'user_code:linear' is a function, not a Strategy; subclass "
                       "testbed.algorithms.base.Strategy"),
    "no aggregate": ("algorithm.name=user_code:NoAggregate",
                     "algorithm.name: 'user_code:NoAggregate' does not define aggregate(self, state, round, "
                     "arrivals, failures); add it"),
    "wrong signature": ("algorithm.name=user_code:ShortConfigure",
                        "algorithm.name: 'user_code:ShortConfigure'.configure(self, state, ctx) cannot be called as "
                        "the testbed calls it, configure(self, state, ctx, rng)"),
    "unknown option": ("algorithm={name: user_code:Damped, options: {stp: 1}}",
                       "algorithm.options: stp is not an option of 'user_code:Damped' (it takes: step)"),
    "option's type": ("algorithm={name: user_code:MyFedAvg, options: {proximal_mu: [1]}}",
                      "algorithm.options.proximal_mu: Input should be a valid number (got [1])"),
    "option's value": ("algorithm={name: user_code:Damped, options: {step: -1}}", None),
    "model signature": ("model.name=user_code:two_arguments",
                        "model.name: 'user_code:two_arguments'(sample_shape, num_classes) cannot be called as a "
                        "model factory is, (sample_shape, num_classes, width)"),
    "model returns no module": ("model.name=user_code:not_a_module",
                                "model.name: 'user_code:not_a_module' returned list, not a torch.nn.Module"),
    "unknown model": ("model.name=cnn_51", "model.name: unknown model 'cnn_51'; choose one of: char_lstm, cnn1d_har, cnn_512"),
    "loader raises": ("data.name=user_code:broken",
                      "data.name: 'user_code:broken' raised KeyError: \"no column 'label'\"; fix the loader"),
    "loader returns no dataset": ("data.name=user_code:not_a_dataset",
                                  "data.name: 'user_code:not_a_dataset' returned str, not a Dataset"),
    "loader's dtype": ("data.name=user_code:float64_inputs", "data.name: 'user_code:float64_inputs' returned a "
                       "dataset that cannot train: train_x is torch.float64; give float32 inputs (images)"),
    "loader option": ("data.options={m: 3}", "data.options: m is not an option of dataset 'user_code:blobs' "
                      "(it takes: n, classes, seed)"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_plugins_end_in_one_line(case, user_code, capsys):
    setting, expected = BAD[case]
    file = write_yaml(user_code / "s.yaml", FOUR_BOARDS)
    assert main(["run", str(file), "--out", str(user_code / "runs"), "--quiet", "--set", setting]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {file}: ")
    if expected is not None:
        assert expected in err, err
    else:  # the strategy's own constructor refused the value
        assert "algorithm.options: 'user_code:Damped' refused its options (ValueError: step must be in [0, 1])" in err


def test_a_plugin_is_imported_from_the_folder_the_user_runs_in(tmp_path, monkeypatch):
    """The `testbed` command does not put the current directory on sys.path as `python -m` does."""
    (tmp_path / "only_here.py").write_text(textwrap.dedent("""
        def model(sample_shape, num_classes, width):
            import torch
            return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(num_classes))
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", str(tmp_path))])
    assert callable(plugins.resolve("model", {}, "only_here:model"))


def test_the_engine_takes_plugins_in_process(user_code):
    """The same scenario as a dict through the engine (no CLI): the user's dataset splits over the devices."""
    records, _ = simulate(FOUR_BOARDS | {"algorithm": {"name": "user_code:Damped", "options": {"step": 1.0}}},
                          user_code)
    assert [r["arrived"] for r in records] == [4, 4]


def test_a_plugin_that_crashes_mid_run_is_named_not_called_a_testbed_bug(user_code, capsys):
    file = write_yaml(user_code / "s.yaml", FOUR_BOARDS)
    assert main(["run", str(file), "--out", str(user_code / "runs"), "--quiet", "--set",
                 "algorithm.name=user_code:Crashing"]) == 2
    err = capsys.readouterr().err
    line = USER_MODULE.splitlines().index("        return 1 / 0") + 1
    assert err == (f"error: the plugin code at {user_code / 'user_code.py'}:{line} in aggregate raised "
                   "ZeroDivisionError: division by zero; fix it there (traceback in runs/plugins/0/error.log; "
                   "--debug shows it here)\n")   # the run folder relative to the current one, user_code


def test_a_plugin_that_crashes_while_built_is_named_not_called_a_testbed_bug(user_code, capsys):
    """Before round 1 (the strategy's constructor, as build.py makes it): the same line, the traceback in a
    temporary file (there is no run folder yet). Which code is the user's comes from the scenario's references."""
    file = write_yaml(user_code / "s.yaml", FOUR_BOARDS)
    assert main(["run", str(file), "--out", str(user_code / "runs"), "--quiet", "--set",
                 "algorithm.name=user_code:Fragile"]) == 2
    err = capsys.readouterr().err
    line = USER_MODULE.splitlines().index('        raise RuntimeError("no GPU here")') + 1
    assert err.startswith(f"error: the plugin code at {user_code / 'user_code.py'}:{line} in __post_init__ raised "
                          "RuntimeError: no GPU here; fix it there (traceback in "), err
    assert err.count("\n") == 1 and not (user_code / "runs").exists()
