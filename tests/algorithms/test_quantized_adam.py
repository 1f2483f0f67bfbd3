"""1-bit Adam and Efficient Adam (testbed/algorithms/quantized_adam.py): error feedback on both ends by hand, the
exact sizes of their payloads, the frozen second moment, and a device rebuilding the server's model bit for bit
from its copy and the 1-bit broadcast.

The hand numbers use a linear model with weight [1, 3] and bias [1] (d = 4, two tensors, so two scales).
"""
import math

import pandas as pd
import pytest
import torch
from helpers import run_recorded, tiny_blobs, tiny_scenario

from testbed.algorithms.base import Arrival, RoundContext, ServerState, Task
from testbed.algorithms.quantized_adam import ErrorFeedbackAdam
from testbed.data import DATASETS
from testbed.local import LocalAdam, train_one
from testbed.payload import Dense, Sign, transmit
from testbed.algorithms.base import Build
from testbed.schema.algorithms.adaptive import EfficientAdamConfig, OneBitAdamConfig
from testbed.strategies import strategy_of

CLIENT = LocalAdam(lr=0.1, beta1=0.9, beta2=0.99, eps=0.01, bias_correction=False, eps_inside_sqrt=True,
                   local_steps=1)
SHAPES = {"weight": torch.Size([1, 3]), "bias": torch.Size([1])}


def params(flat: list[float], part: str = "") -> dict[str, torch.Tensor]:
    key = (lambda n: n) if part == "" else (lambda n: f"{part}:{n}")
    return {key("weight"): torch.tensor([flat[:3]]), key("bias"): torch.tensor(flat[3:])}


def values(tensors: dict[str, torch.Tensor], part: str = "") -> list[float]:
    key = (lambda n: n) if part == "" else (lambda n: f"{part}:{n}")
    return torch.cat([tensors[key(n)].reshape(-1) for n in SHAPES]).tolist()


def task(round: int, local: dict, up, down=Dense()) -> Task:
    return Task(0, round, 1, 1, down, up, local=local)


EFFICIENT = ErrorFeedbackAdam(CLIENT, Sign(norm="mean_abs"), local_moments=True)
ONEBIT = ErrorFeedbackAdam(CLIENT, Sign(parts=("", "m"), norm="rms"), warmup_rounds=2)


def test_device_error_feedback_by_hand():
    """Efficient Adam's device: y = change + e, C(y) = mean|y| sign(y) per tensor, e' = y - C(y).
    change = [-0.1, 0.2, 0.3 | -0.1], e = [0.05, -0.05, 0 | 0.02] -> y = [-0.05, 0.15, 0.3 | -0.08];
    weight: mean|y| = 0.5 / 3 = 1/6 -> C = [-1/6, 1/6, 1/6]; bias: C = [-0.08]; e' = y - C."""
    held = params([0.5, -0.5, 1.0, 0.0])
    local = {"round": 3, "copy": held, "error": params([0.05, -0.05, 0.0, 0.02])}
    trained = params([0.4, -0.3, 1.3, -0.1])
    result = EFFICIENT.finish(task(5, local, EFFICIENT.up), trained, held, {}, CLIENT.init(held))
    assert values(result.update) == pytest.approx([-0.05, 0.15, 0.3, -0.08], abs=1e-7)
    assert values(transmit(EFFICIENT.up, result.update)) == pytest.approx([-1 / 6, 1 / 6, 1 / 6, -0.08], abs=1e-7)
    assert values(result.local_state["error"]) == pytest.approx([-0.05 + 1 / 6, 0.15 - 1 / 6, 0.3 - 1 / 6, 0.0],
                                                                abs=1e-7)
    assert result.local_state["round"] == 5 and result.local_state["copy"] is held
    assert set(result.local_state["moments"]) >= {"m:weight", "v:bias"}  # Efficient Adam keeps its own moments


def test_onebit_compresses_model_and_momentum_with_rms_scales():
    """1-bit Adam after warm-up: C(x) = ||x||_2 / sqrt(n) sign(x) on the model's and the momentum's changes, each
    with its own error; V's change is not sent (frozen). Model y = [-0.05, 0.15, 0.3 | -0.08] as above: weight
    scale sqrt((0.0025 + 0.0225 + 0.09) / 3) = sqrt(0.115 / 3); momentum change [0.2, -0.1, 0.0 | 0.4], no error:
    scale sqrt(0.05 / 3), bias 0.4, and the zero goes to +scale."""
    held = params([0.5, -0.5, 1.0, 0.0]) | params([0.0] * 4, "m") | params([1.0] * 4, "v")
    local = {"round": 2, "copy": held, "error": params([0.05, -0.05, 0.0, 0.02])}
    opt_state = params([0.2, -0.1, 0.0, 0.4], "m") | params([1.0] * 4, "v")
    result = ONEBIT.finish(task(3, local, ONEBIT.up), params([0.4, -0.3, 1.3, -0.1]), held, {}, opt_state)
    assert set(result.update) == {"weight", "bias", "m:weight", "m:bias"}
    sent = transmit(ONEBIT.up, result.update)
    w, m = math.sqrt(0.115 / 3), math.sqrt(0.05 / 3)
    assert values(sent) == pytest.approx([-w, w, w, -0.08], abs=1e-7)
    assert values(sent, "m") == pytest.approx([m, -m, m, 0.4], abs=1e-7)
    assert values(result.local_state["error"], "m") == pytest.approx([0.2 - m, -0.1 + m, -m, 0.0], abs=1e-7)


def test_server_error_feedback_by_hand():
    """Server: z = sum_n |D_n| C_n / sum |D_n| + e_s; W += C(z); e_s' = z - C(z); C(z) is what holders download.
    Updates [0.2, -0.2, 0.2 | 0.1] (3 samples) and [-0.2, -0.2, 0.6 | -0.1] (1 sample): mean [0.1, -0.2, 0.3 |
    0.05]; e_s = [0.1, 0, 0 | 0] -> z = [0.2, -0.2, 0.3 | 0.05]; C(z) = [7/30, -7/30, 7/30 | 0.05]."""
    state = ServerState(params([0.5, -0.5, 1.0, 0.0]), {"error": params([0.1, 0.0, 0.0, 0.0])}, {})
    arrivals = [Arrival(0, 3, params([0.2, -0.2, 0.2, 0.1]), {"train_loss": 1.0}, {"round": 4}),
                Arrival(1, 1, params([-0.2, -0.2, 0.6, -0.1]), {"train_loss": 3.0}, {"round": 4})]
    new, metrics = EFFICIENT.aggregate(state, 4, arrivals, [])
    s = 0.7 / 3
    assert values(new.params) == pytest.approx([0.5 + s, -0.5 - s, 1.0 + s, 0.05], abs=1e-6)
    assert values(new.optimizer["error"]) == pytest.approx([0.2 - s, -0.2 + s, 0.3 - s, 0.0], abs=1e-6)
    assert values(new.optimizer["q"], "q") == pytest.approx([s, -s, s, 0.05], abs=1e-6)
    assert metrics["train_loss"] == pytest.approx(1.5) and new.clients[1] == {"round": 4}


def test_who_downloads_what():
    """A device that took part in the previous (compressed) round downloads C(z) only; anyone else, and everyone
    right after the warm-up, downloads the dense state. Uplinks are dense in the warm-up, signs after it."""
    state = ServerState(params([0.0] * 4), {"m": params([0.0] * 4), "v": params([0.0] * 4)},
                        {0: {"round": 3}, 1: {"round": 2}, 2: {"round": 1}})
    ctx = lambda r: RoundContext(r, torch.arange(3).numpy(), 3, torch.ones(3, dtype=torch.int64).numpy(), None)  # noqa
    import numpy as np

    tasks = {t.device: t for t in ONEBIT.configure(state, ctx(4), np.random.default_rng(0))}
    assert tasks[0].down == Sign(parts=("q", "qm"), norm="rms") and tasks[0].up == ONEBIT.up
    assert tasks[1].down == tasks[2].down == Dense("float32", ("", "m", "v"))
    after_warmup = {t.device: t for t in ONEBIT.configure(state, ctx(3), np.random.default_rng(0))}
    assert all(t.down == Dense("float32", ("", "m", "v")) for t in after_warmup.values())  # round 2 was warm-up
    warmup = ONEBIT.configure(state, ctx(2), np.random.default_rng(0))
    assert all(t.up == Dense("float32", ("", "m", "v")) for t in warmup)


def test_frozen_second_moment_is_exact():
    """A per-client beta2 of 1 keeps v bit for bit over local steps (1-bit Adam's frozen variance), while m moves."""
    x, y = torch.randn(12, 3, generator=torch.Generator().manual_seed(1)), torch.zeros(12)
    w = params([0.5, -0.5, 1.0, 0.0])
    loss = lambda p, xb, yb, anchor=None, extras=None: (  # noqa: E731
        0.5 * ((xb @ p["weight"].T + p["bias"]).squeeze(1) - yb).square().mean(), {"accuracy": torch.tensor(0.0)})
    objective = lambda p, anchor, xb, yb, extras: loss(p, xb, yb)  # noqa: E731
    v = params([0.3, 0.2, 0.1, 0.05])
    state = CLIENT.pack(params([0.0] * 4), v) | {"beta2": torch.ones((), dtype=torch.float64)}
    schedule = LocalAdam(**{**CLIENT.__dict__, "local_steps": 4, "batch_size": 3})
    trained, _, final = train_one(objective, w, x, y, schedule, __import__("numpy").random.default_rng(0), {}, state)
    assert all(torch.equal(final[f"v:{n}"], v[n]) for n in SHAPES)
    assert not torch.equal(final["m:weight"], torch.zeros(1, 3))
    with pytest.raises(ValueError, match="bias_correction=False"):
        LocalAdam(lr=0.1).step(w, w, LocalAdam(lr=0.1).init(w) | {"beta2": torch.ones((), dtype=torch.float64)})


def test_configs():
    build = Build(LocalAdam(lr=0.001, local_steps=30), Dense(), Dense(), 60, 20, 20, None)
    onebit = strategy_of(OneBitAdamConfig(name="onebit_adam"), build)
    assert onebit.warmup_rounds == 6 and onebit.up == Sign(parts=("", "m"), norm="rms") and not onebit.local_moments
    assert strategy_of(OneBitAdamConfig(name="onebit_adam", warmup_rounds=0), build).warmup_rounds == 0
    efficient = strategy_of(EfficientAdamConfig(name="efficient_adam"), build)
    assert efficient.up == Sign(norm="mean_abs") and efficient.local_moments and efficient.warmup_rounds == 0
    assert efficient.client.eps_inside_sqrt and not efficient.client.bias_correction


class Recording:
    """The strategy, recording the server's model at each broadcast and the model each device trains from."""

    def __init__(self, strategy):
        self.inner, self.broadcasts, self.starts = strategy, [], []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def broadcast(self, state):
        self.broadcasts.append({n: t.clone() for n, t in state.params.items()})
        return self.inner.broadcast(state)

    def start(self, task, received):
        model, opt_state = self.inner.start(task, received)
        self.starts.append((task.round, task.down, model, opt_state))
        return model, opt_state


@pytest.fixture
def runs(monkeypatch):
    monkeypatch.setitem(DATASETS, "tiny_blobs", tiny_blobs)

    def run(name: str, executor: str = "serial", **algorithm):
        return run_recorded(tiny_scenario({"name": name, **algorithm}, executor, rounds=4), Recording)

    return run


@pytest.mark.parametrize("name, warmup", [("onebit_adam", 1), ("efficient_adam", 0)])
def test_end_to_end_bytes_and_exact_rebuild(runs, name, warmup):
    """Two always-on devices, 4 rounds: the uplinks and downlinks have the Sign codec's exact sizes
    (logreg: d = 21 entries in 2 tensors; 1-bit Adam sends 2 parts: 4 * 2 * 2 + ceil(42 / 8) = 22 bytes;
    Efficient Adam 1 part: 8 + ceil(21 / 8) = 11 bytes), the warm-up is dense (21 * 4 * 3 = 252 bytes), and a
    device that downloaded only C(z) trains from exactly the server's model. Serial and batched agree."""
    extra = {"warmup_rounds": warmup} if name == "onebit_adam" else {}
    rounds, rec, _ = runs(name, **extra)
    sign, dense = (22, 252) if name == "onebit_adam" else (11, 84)
    assert rounds.bytes_up.tolist() == [2 * (dense if r <= warmup else sign) for r in range(1, 5)]
    assert rounds.bytes_down.tolist() == [2 * (dense if r <= warmup + 1 else sign) for r in range(1, 5)]
    rebuilt = [(r, model) for r, down, model, _ in rec.starts if isinstance(down, Sign)]
    assert len(rebuilt) == 2 * (3 - warmup)
    for r, model in rebuilt:
        assert all(torch.equal(model[n], rec.broadcasts[r - 1][n]) for n in model)
    if name == "onebit_adam":  # the frozen V travels unchanged after the warm-up
        assert all(opt_state.get("beta2") is not None for r, _, _, opt_state in rec.starts if r > warmup)
    batched, _, _ = runs(name, "batched", **extra)
    pd.testing.assert_frame_equal(rounds, batched)


def test_onebit_adam_on_six_devices_two_a_round_plans_the_bytes_it_sends(monkeypatch):
    """Issue 45: on 6 devices with 2 a round, onebit_adam's dense downlink carried the broadcast's `q:` parts and
    was encoded larger than the clock had planned ("codec fp32x3: encoded 420 bytes, predicted 252")."""
    import testbed.data
    from helpers import simulate, tiny_blobs, tiny_scenario

    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    six = {"groups": [{"profile": "raspberry_pi_4", "count": 3}, {"profile": "jetson_nano", "count": 3}]}
    raw = tiny_scenario({"name": "onebit_adam"}, rounds=6) | {"fleet": six, "round": {"clients_per_round": 2}}
    records, _ = simulate(raw)
    assert len(records) == 6
