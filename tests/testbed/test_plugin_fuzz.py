"""A plugin that returns wrong values, driven through every hook (issue 45): a strategy (init, configure, start,
finish, aggregate, personal_models), a selector (select, observe) and a model factory each return, in turn, values
drawn from a seeded list of wrong ones (types, shapes, dtypes, devices, layouts, NaN, negative sizes, huge ids,
None). Every run ends in one line with exit 2 naming the plugin, or completes where the value happens to be legal;
never the internal-error exit, and the run's own tables are never the plugin's."""
from __future__ import annotations

import random

import pytest
from helpers import user_module, write_yaml
from test_contracts import SCENARIO
from test_plugins import USER_MODULE as PLUGINS_MODULE   # the scenario's data loader

from testbed.cli import main

USER = '''
from dataclasses import dataclass, replace

import numpy as np
import torch

from testbed.algorithms.fedavg import FedAvg
from testbed.selection import Selector
from testbed.selection.uniform import Uniform

BREAK = {}   # hook -> the value it returns instead of its own (set by the test)


def _or(hook, own):
    return BREAK[hook]() if hook in BREAK else own


@dataclass(frozen=True)
class Fuzzed(FedAvg):
    def init(self, params):
        return _or("init", super().init(params))

    def configure(self, state, ctx, rng):
        return _or("configure", super().configure(state, ctx, rng))

    def start(self, task, received):
        return _or("start", super().start(task, received))

    def finish(self, task, trained, received, stats, opt_state):
        return _or("finish", super().finish(task, trained, received, stats, opt_state))

    def aggregate(self, state, round, arrivals, failures):
        return _or("aggregate", super().aggregate(state, round, arrivals, failures))

    def personal_models(self, state):
        return _or("personal_models", super().personal_models(state))


@dataclass(frozen=True)
class FuzzedSelector(Uniform):
    def select(self, state, ctx, rng):
        return _or("select", super().select(state, ctx, rng))

    def observe(self, state, round, now, outcomes, history):
        return _or("observe", super().observe(state, round, now, outcomes, history))


def fuzzed_model(sample_shape, num_classes, width):
    own = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(int(np.prod(sample_shape)), num_classes))
    return _or("model", own)
'''

WRONG = {   # name -> a function of nothing that makes the wrong value afresh
    "None": lambda: None, "zero": lambda: 0, "negative": lambda: -5, "NaN": lambda: float("nan"),
    "a string": lambda: "text", "an empty list": lambda: [], "an empty dict": lambda: {}, "a tuple": lambda: (1,),
    "an object": lambda: object(), "a tensor": lambda: __import__("torch").zeros(3),
    "a float64 tensor dict": lambda: {"1.weight": __import__("torch").zeros(2, dtype=__import__("torch").float64)},
    "a meta tensor": lambda: __import__("torch").zeros(3, device="meta"), "a huge id": lambda: 10**12,
    "huge ids": lambda: __import__("numpy").array([10**12]), "negative ids": lambda: __import__("numpy").array([-3]),
    "a pair of Nones": lambda: (None, None), "a pair of NaNs": lambda: (float("nan"), float("nan")),
}
HOOKS = ["init", "configure", "start", "finish", "aggregate", "personal_models", "select", "observe", "model"]
ALL = [(h, w) for h in HOOKS for w in WRONG]
SAMPLED = sorted(random.Random(45).sample(ALL, 40))   # the default run's, seeded: under 30 s
CASES = SAMPLED + [pytest.param(h, w, marks=pytest.mark.slow) for h, w in ALL if (h, w) not in SAMPLED]


@pytest.fixture
def user_code(tmp_path, monkeypatch):
    yield from user_module(tmp_path, monkeypatch, PLUGINS_MODULE + USER)


@pytest.mark.parametrize("hook, wrong", CASES, ids=[f"{h}-{w}" for h, w in SAMPLED] +
                         [f"{h}-{w}" for h, w in ALL if (h, w) not in SAMPLED])
def test_a_plugin_returning_a_wrong_value_is_named_or_harmless(hook, wrong, user_code, capsys):
    import user_code as plugin

    plugin.BREAK = {hook: WRONG[wrong]}
    raw = SCENARIO | {"algorithm": {"name": "user_code:Fuzzed"}, "selection": {"name": "user_code:FuzzedSelector"},
                      "model": {"name": "user_code:fuzzed_model"},
                      "data": SCENARIO["data"] | {"client_split": {"test_fraction": 0.2}}}   # personal models scored
    code = main(["run", str(write_yaml(user_code / "s.yaml", raw)), "--out", str(user_code / "runs"), "--quiet"])
    err = "\n".join(line for line in capsys.readouterr().err.splitlines() if not line.startswith("warning:"))
    assert code in (0, 2) and "internal error" not in err and "Traceback" not in err, err
    if code == 2:
        assert err.count("\n") == 0 and err.startswith("error: ") and "user_code" in err, err


def test_the_fuzzed_plugins_complete_when_nothing_is_broken(user_code, capsys):
    import user_code as plugin

    plugin.BREAK = {}
    raw = SCENARIO | {"algorithm": {"name": "user_code:Fuzzed"}, "selection": {"name": "user_code:FuzzedSelector"},
                      "model": {"name": "user_code:fuzzed_model"},
                      "data": SCENARIO["data"] | {"client_split": {"test_fraction": 0.2}}}
    code = main(["run", str(write_yaml(user_code / "s.yaml", raw)), "--out", str(user_code / "runs"), "--quiet"])
    assert code == 0, capsys.readouterr().err
