"""FedLion, MFL and FAFED (testbed/algorithms/fedlion.py on moments.py, specs/fedlion.md), checked against numbers
computed by hand.

The hand rounds: a model of d = 4 entries (weight 1x3, bias 1; flattened order w0 w1 w2 b) and the quadratic loss
0.5 ||p - t||^2 with t the mean of the minibatch's rows, so the gradient is g = p - t. Two devices hold 3 and 1
samples (a sample-weighted mean would be 3/4 : 1/4; these methods average uniformly, 1/2 : 1/2), batch size 10, so
every local step is a full batch; E = 2 local steps from the server's
    X = [0.5, -0.5, 1.0 | 0.0],  M = [0.1, 0.0, -0.2 | 0.05]
and the targets
    device A: t_A = [1.35, -0.5, 1.0 | -1.0]   (the mean of its 3 rows)
    device B: t_B = [-1.0,  0.5, 3.0 |  0.48]
FedLion with gamma = 0.1, b1 = 0.9, b2 = 0.99 (c = b1 m + (1 - b1) g; x -= gamma sign(c); m = b2 m + (1 - b2) g):
    A, w0: g = -0.85, c = 0.09 - 0.085 = +0.005 -> +1; x = 0.4, m = 0.0905, g = -0.95, c = -0.01355 -> -1: Delta 0
    A, w1: g = 0 and m = 0, so c = 0 and sign(0) = 0 at both steps: Delta 0, m stays 0
    A, w2: c = -0.18, then -0.1682: Delta -2;   A, b: c = 0.145, 0.14355: Delta +2
    B: w0 +2, w1 -2, w2 -2; b: c = 0.045 - 0.048 = -0.003 -> -1, then 0.04023 - 0.038 = +0.00223 -> +1: Delta 0
so Delta_A = [0, 0, -2, 2], Delta_B = [2, -2, -2, 0], mean [1, -1, -2, 1], and the server's new model is
X - 0.1 mean = [0.4, -0.4, 1.2, -0.1] (sample-weighted it would be [0.45, -0.45, 1.2, -0.15]).
"""
import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from helpers import (TINY_CLASSES as CLASSES, TINY_FEATURES as FEATURES, run_recorded, tiny_blobs,
                     tiny_scenario)

from testbed import cli
from testbed import scenario as sc
from testbed.algorithms.base import Arrival, RoundContext, ServerState
from testbed.algorithms.fedlion import FAFED, MFL, FedLion
from testbed.data import DATASETS
from testbed.errors import TestbedError
from testbed.local import LocalAdam, LocalLion, LocalSGD, train_one
from testbed.payload import Dense, IntegerDelta, transmit
from testbed.schema.algorithms.adaptive import FAFEDConfig, FedLionConfig, MFLConfig
from testbed.strategies import strategy_of

SHAPES = {"weight": torch.Size([1, 3]), "bias": torch.Size([1])}
X0, M0 = [0.5, -0.5, 1.0, 0.0], [0.1, 0.0, -0.2, 0.05]
V0 = [0.01, 0.04, 0.0025, 0.09]  # FAFED's second moment
DATA = {  # device: rows (their mean is the target)
    0: [[1.05, -0.5, 0.8, -1.5], [1.35, -0.5, 1.0, -1.0], [1.65, -0.5, 1.2, -0.5]],
    1: [[-1.0, 0.5, 3.0, 0.48]],
}
TARGET = {0: [1.35, -0.5, 1.0, -1.0], 1: [-1.0, 0.5, 3.0, 0.48]}
GAMMA, B1, B2, E = 0.1, 0.9, 0.99, 2


def as_params(flat: list[float]) -> dict[str, torch.Tensor]:
    return {"weight": torch.tensor([flat[:3]]), "bias": torch.tensor(flat[3:])}


def flat(tensors: dict[str, torch.Tensor], part: str = "") -> torch.Tensor:
    key = lambda n: n if part == "" else f"{part}:{n}"  # noqa: E731
    return torch.cat([tensors[key(n)].reshape(-1) for n in SHAPES])


def loss_fn(params, x, y):
    p = torch.cat([params["weight"].reshape(-1), params["bias"].reshape(-1)])
    return 0.5 * (p - x.mean(0)).square().sum(), torch.zeros(())


def sign(c: float) -> int:
    return (c > 0) - (c < 0)


def lion_by_hand(device: int):
    """E local Lion steps from (X0, M0) in plain floats: (Delta, x, m, mean loss)."""
    delta, xs, ms, losses = [], [], [], [0.0] * E
    for x, m, t in zip(X0, M0, TARGET[device]):
        h_sum = 0
        for s in range(E):
            g = x - t
            losses[s] += 0.5 * g * g
            h = sign(B1 * m + (1 - B1) * g)
            x, m, h_sum = x - GAMMA * h, B2 * m + (1 - B2) * g, h_sum + h
        delta.append(h_sum)
        xs.append(x)
        ms.append(m)
    return delta, xs, ms, sum(losses) / E


def heavy_ball_by_hand(device: int, lr: float, mu: float):
    """E steps of torch's SGD momentum (b = mu b + g; x -= lr b) from (X0, M0): (x, b)."""
    xs, bs = [], []
    for x, b, t in zip(X0, M0, TARGET[device]):
        for _ in range(E):
            b = mu * b + (x - t)
            x = x - lr * b
        xs.append(x)
        bs.append(b)
    return xs, bs


def server_state(strategy, parts=("m",)) -> ServerState:
    state = strategy.init(as_params(X0))
    assert set(state.optimizer) == set(parts)
    assert all(float(t.abs().sum()) == 0 for part in parts for t in state.optimizer[part].values())
    given = {"m": as_params(M0), "v": as_params(V0)}
    return ServerState(state.params, {part: given[part] for part in parts})


def device_round(strategy, state, device, round=1):
    """One device's part of a round as the engine plays it: download, start, train, finish.
    -> (task, result, start state, end state)"""
    task = strategy.configure(state, RoundContext(round, np.array([device]), 1, np.array([3, 1]), None),
                              np.random.default_rng(0))[0]
    assert (task.device, task.round, task.num_samples) == (device, round, len(DATA[device]))
    received = transmit(strategy.down, strategy.broadcast(state), SHAPES)
    params, start_state = strategy.start(task, received)
    x = torch.tensor(DATA[device])
    trained, stats, end_state = train_one(strategy.objective(loss_fn), params, x, torch.zeros(len(x)),
                                          strategy.client, np.random.default_rng(device), state=dict(start_state))
    return task, strategy.finish(task, trained, received, stats, end_state), start_state, end_state


def play_round(strategy, state, round=1):
    """Both devices, uploads through the codec, aggregation. -> (new state, {device: decoded update}, results)"""
    arrivals, results = [], {}
    for device in DATA:
        task, results[device], _, _ = device_round(strategy, state, device, round)
        sent = results[device].update
        assert len(strategy.up.encode(sent)) == strategy.up.nbytes(SHAPES)
        arrivals.append(Arrival(device, task.num_samples, transmit(strategy.up, sent, SHAPES),
                                results[device].metrics))
    new, metrics = strategy.aggregate(state, round, arrivals, [])
    assert set(metrics) == {"train_loss"}
    return new, {a.device: a.update for a in arrivals}, results


def fedlion() -> FedLion:
    return FedLion(LocalLion(lr=GAMMA, batch_size=10, local_steps=E), IntegerDelta(E))


# ------------------------------------------------------------------------------------------- FedLion by hand

def test_lion_by_hand_numbers():
    """The hand rule itself, a few entries written out (the docstring's table)."""
    delta_a, x_a, m_a, loss_a = lion_by_hand(0)
    delta_b, x_b, m_b, _ = lion_by_hand(1)
    assert (delta_a, delta_b) == ([0, 0, -2, 2], [2, -2, -2, 0])
    assert x_a == pytest.approx([0.5, -0.5, 1.2, -0.2]) and x_b == pytest.approx([0.3, -0.3, 1.2, 0.0], abs=1e-12)
    # A, w0: m = 0.99 (0.99 0.1 + 0.01 (-0.85)) + 0.01 (-0.95);  w1 stays 0;  B, b: 0.99 0.0447 + 0.01 (-0.38)
    assert m_a == pytest.approx([0.080095, 0.0, -0.19502, 0.067905])
    assert m_b == pytest.approx([0.12686, -0.0189, -0.23482, 0.040453])
    assert loss_a == pytest.approx(0.5 * (0.85 ** 2 + 1.0))  # both steps: 0.5 (0.7225 + 1) and 0.5 (0.9025 + 0.01 + 0.81)


def test_fedlion_device_uploads_the_sum_of_its_signs_and_its_momentum():
    strategy = fedlion()
    assert strategy.uniform and strategy.down == Dense("float32", ("", "m"))
    assert strategy.down.nbytes(SHAPES) == 8 * 4
    state = server_state(strategy)
    sent = strategy.broadcast(state)
    assert list(sent) == ["weight", "bias", "m:weight", "m:bias"]
    for device in DATA:
        delta, x, m, loss = lion_by_hand(device)
        _, result, start, end = device_round(strategy, state, device)
        assert flat(start, "m").tolist() == pytest.approx(M0)  # the device starts from the global momentum
        assert set(result.update) == {"weight", "bias", "m:weight", "m:bias"}
        got = flat(result.update)
        assert got.tolist() == delta  # exact integers, not (x_prev - x) / gamma up to rounding
        assert torch.equal(got, got.round()) and got.abs().max() <= E
        assert flat(end, "m").tolist() == pytest.approx(m, rel=1e-5, abs=1e-7)
        # the momentum travels as its change; the server adds it back to M
        assert (flat(result.update, "m") + torch.tensor(M0)).tolist() == pytest.approx(m, rel=1e-5, abs=1e-7)
        assert result.metrics["train_loss"] == pytest.approx(loss, rel=1e-5)


def test_integer_delta_carries_the_signs_exactly():
    """d = 4, E = 2: b = ceil(log2 5) = 3 bits per entry, ceil(4 * 3 / 8) = 2 bytes, plus 4 fp32 momenta."""
    codec = IntegerDelta(E)
    assert codec.bits_per_entry == 3 == math.ceil(math.log2(2 * E + 1))
    assert codec.nbytes(SHAPES) == math.ceil(4 * 3 / 8) + 4 * 4 == 18 and codec.nbits(SHAPES) == 4 * 3 + 4 * 32
    strategy, state = fedlion(), server_state(fedlion())
    for device in DATA:
        _, result, _, _ = device_round(strategy, state, device)
        payload = codec.encode(result.update)
        assert len(payload) == 18
        decoded = transmit(codec, result.update, SHAPES)
        assert flat(decoded).tolist() == lion_by_hand(device)[0]
        assert torch.equal(flat(decoded, "m"), flat(result.update, "m"))  # fp32 momentum changes, bit for bit
    # every value of [-E, E] survives, and so does the momentum bit for bit
    values = {"weight": torch.tensor([[-2.0, -1.0, 0.0]]), "bias": torch.tensor([2.0]),
              "m:weight": torch.tensor([[0.1, -1e-8, 3.0]]), "m:bias": torch.tensor([-7.25])}
    back = transmit(codec, values, SHAPES)
    assert all(torch.equal(back[k], values[k]) for k in values)
    # the first byte: (Delta + E) as 3-bit integers, most significant first: 000 001 01|0 100 (4 = 2 + E)
    assert codec.encode(values)[:2] == bytes([0b00000101, 0b01000000])
    with pytest.raises(ValueError, match="integers"):
        codec.encode(values | {"bias": torch.tensor([0.5])})
    with pytest.raises(ValueError, match=r"\[-2, 2\]"):
        codec.encode(values | {"bias": torch.tensor([3.0])})


def test_fedlion_server_round_by_hand():
    """x = X - gamma mean(Delta) with 1/2 : 1/2 although the devices hold 3 and 1 samples; m = mean(m_i)."""
    strategy = fedlion()
    state = server_state(strategy)
    new, decoded, results = play_round(strategy, state)
    (delta_a, _, m_a, loss_a), (delta_b, _, m_b, loss_b) = lion_by_hand(0), lion_by_hand(1)
    for device in DATA:
        assert flat(decoded[device]).tolist() == lion_by_hand(device)[0]
    mean_delta = [(a + b) / 2 for a, b in zip(delta_a, delta_b)]
    assert mean_delta == [1.0, -1.0, -2.0, 1.0]
    expected = [x - GAMMA * d for x, d in zip(X0, mean_delta)]
    assert expected == pytest.approx([0.4, -0.4, 1.2, -0.1])
    assert flat(new.params).tolist() == pytest.approx(expected, rel=1e-6, abs=1e-7)
    weighted = [x - GAMMA * (3 * a + b) / 4 for x, a, b in zip(X0, delta_a, delta_b)]
    assert flat(new.params)[0].item() != pytest.approx(weighted[0], abs=1e-3)  # not 0.45
    # the same as the plain average of the local models (the paper's remark)
    x_a, x_b = lion_by_hand(0)[1], lion_by_hand(1)[1]
    assert flat(new.params).tolist() == pytest.approx([(a + b) / 2 for a, b in zip(x_a, x_b)], abs=1e-6)
    assert flat(new.optimizer["m"]).tolist() == pytest.approx([(a + b) / 2 for a, b in zip(m_a, m_b)],
                                                             rel=1e-5, abs=1e-7)
    assert list(new.optimizer) == ["m"]
    # the next broadcast carries the averaged momentum
    assert flat(strategy.broadcast(new), "m").tolist() == pytest.approx(flat(new.optimizer["m"]).tolist())
    _, train_loss = strategy.aggregate(state, 1, [Arrival(d, len(DATA[d]), decoded[d], results[d].metrics)
                                                  for d in DATA], [])
    # the reported train loss is weighted by samples (fedavg.mean_metric), unlike the model average
    assert (loss_a, loss_b) == pytest.approx((0.86125, 0.5 * (7.4804 + 6.5244) / 2))
    assert train_loss["train_loss"] == pytest.approx((3 * loss_a + loss_b) / 4, rel=1e-5)
    assert strategy.aggregate(new, 2, [], []) == (new, {})  # nobody arrived: nothing changes


# ------------------------------------------------------------------------------------------- MFL by hand

def test_mfl_round_by_hand():
    lr, mu = 0.1, 0.9
    strategy = MFL(LocalSGD(lr=lr, batch_size=10, local_steps=E, momentum=mu), Dense("float32", ("", "m")))
    assert strategy.uniform and strategy.down == strategy.up == Dense("float32", ("", "m"))
    assert strategy.up.nbytes(SHAPES) == 8 * 4
    state = server_state(strategy)
    for device in DATA:
        _, result, start, end = device_round(strategy, state, device)
        x, b = heavy_ball_by_hand(device, lr, mu)
        assert flat(start, "m").tolist() == pytest.approx(M0)  # from the global buffer, not zeros
        assert flat(end, "m").tolist() == pytest.approx(b, rel=1e-5, abs=1e-7)
        assert flat(result.update).tolist() == pytest.approx([a - o for a, o in zip(x, X0)], rel=1e-5, abs=1e-6)
    # device A, w0 written out: b = 0.9 0.1 + (0.5 - 1.35) = -0.76; x = 0.576; b = -0.684 - 0.774 = -1.458
    x, b = heavy_ball_by_hand(0, lr, mu)
    assert (x[0], b[0]) == pytest.approx((0.576 + 0.1458, -1.458))
    # torch.optim.SGD from the same buffer gives the same
    p = torch.tensor(X0, requires_grad=True)
    opt = torch.optim.SGD([p], lr=lr, momentum=mu)
    opt.state[p]["momentum_buffer"] = torch.tensor(M0)
    for _ in range(E):
        opt.zero_grad()
        (0.5 * (p - torch.tensor(TARGET[0])).square().sum()).backward()
        opt.step()
    assert p.tolist() == pytest.approx(x, rel=1e-6) and opt.state[p]["momentum_buffer"].tolist() == pytest.approx(b)
    new, _, _ = play_round(strategy, state)
    (x_a, b_a), (x_b, b_b) = heavy_ball_by_hand(0, lr, mu), heavy_ball_by_hand(1, lr, mu)
    assert flat(new.params).tolist() == pytest.approx([(a + c) / 2 for a, c in zip(x_a, x_b)], rel=1e-5, abs=1e-6)
    assert flat(new.optimizer["m"]).tolist() == pytest.approx([(a + c) / 2 for a, c in zip(b_a, b_b)], rel=1e-5)
    assert flat(new.params)[0].item() != pytest.approx((3 * x_a[0] + x_b[0]) / 4, abs=1e-3)


# ------------------------------------------------------------------------------------------- FAFED by hand

def fafed(weight_decay=0.0) -> FAFED:
    return FAFED(LocalAdam(lr=GAMMA, batch_size=10, local_steps=E, beta1=0.9, beta2=0.99, eps=1e-6,
                           decoupled=True, weight_decay=weight_decay), Dense("float32", ("", "m", "v")))


def adamw_from(device, step, steps, weight_decay=0.0):
    """torch.optim.AdamW on the same loss from X0 with exp_avg M0, exp_avg_sq V0 after `step` steps."""
    w, b = torch.tensor([X0[:3]], requires_grad=True), torch.tensor(X0[3:], requires_grad=True)
    opt = torch.optim.AdamW([w, b], lr=GAMMA, betas=(0.9, 0.99), eps=1e-6, weight_decay=weight_decay,
                            foreach=False)
    for p, m, v in ((w, as_params(M0)["weight"], as_params(V0)["weight"]),
                    (b, as_params(M0)["bias"], as_params(V0)["bias"])):
        opt.state[p] = {"step": torch.tensor(float(step)), "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    x = torch.tensor(DATA[device])
    for _ in range(steps):
        opt.zero_grad()
        loss_fn({"weight": w, "bias": b}, x, None)[0].backward()
        opt.step()
    cat = lambda key: torch.cat([opt.state[p][key].reshape(-1) for p in (w, b)])  # noqa: E731
    return torch.cat([w.detach().reshape(-1), b.detach()]), cat("exp_avg"), cat("exp_avg_sq"), opt.state[w]["step"]


def test_fafed_starts_round_3_at_step_4_and_matches_adamw():
    strategy = fafed()
    assert strategy.uniform and strategy.PARTS == ("m", "v")
    assert strategy.down == strategy.up == Dense("float32", ("", "m", "v")) and strategy.up.nbytes(SHAPES) == 12 * 4
    state = server_state(strategy, ("m", "v"))
    assert list(strategy.broadcast(state)) == ["weight", "bias", "m:weight", "m:bias", "v:weight", "v:bias"]
    for device in DATA:
        _, result, start, end = device_round(strategy, state, device, round=3)
        assert start["step"].dtype == torch.float64 and start["step"].item() == (3 - 1) * E == 4
        assert end["step"].item() == 6
        x, m, v, step = adamw_from(device, 4, E)
        assert step.item() == 6
        assert (flat(result.update) + torch.tensor(X0)).tolist() == pytest.approx(x.tolist(), rel=1e-5, abs=1e-6)
        assert flat(end, "m").tolist() == pytest.approx(m.tolist(), rel=1e-5, abs=1e-7)
        assert flat(end, "v").tolist() == pytest.approx(v.tolist(), rel=1e-5, abs=1e-8)
        assert set(result.update) == {"weight", "bias", "m:weight", "m:bias", "v:weight", "v:bias"}  # no step
    # bias correction at t = 5: device B, w1, one step by hand (g = -1.0)
    _, result, _, end = device_round(FAFED(LocalAdam(lr=GAMMA, batch_size=10, local_steps=1, beta1=0.9, beta2=0.99,
                                                eps=1e-6, decoupled=True), strategy.up), state, 1, round=5)
    m1, v1 = 0.9 * 0.0 + 0.1 * -1.0, 0.99 * 0.04 + 0.01 * 1.0
    step = -GAMMA * (m1 / (1 - 0.9 ** 5)) / (math.sqrt(v1 / (1 - 0.99 ** 5)) + 1e-6)
    assert end["step"].item() == 5
    x, _, _, _ = adamw_from(1, 4, 1)
    assert x[1].item() == pytest.approx(-0.5 + step, rel=1e-6)
    assert flat(result.update)[1].item() == pytest.approx(step, rel=1e-5)


@pytest.mark.parametrize("step", [0, 4])
def test_local_adam_decoupled_is_adamw_with_weight_decay(step):
    """One step with weight decay 0.1: the decay is decoupled (param *= 1 - lr wd), as torch's AdamW."""
    strategy = fafed(weight_decay=0.1)
    client = dataclasses.replace(strategy.client, local_steps=1)
    state = client.pack(as_params(M0), as_params(V0), step=float(step))
    g = {n: p - t for (n, p), t in zip(as_params(X0).items(), as_params(TARGET[0]).values())}
    new, new_state = client.step(as_params(X0), g, state)
    x, m, v, _ = adamw_from(0, step, 1, weight_decay=0.1)
    assert flat(new).tolist() == pytest.approx(x.tolist(), rel=1e-6, abs=1e-7)
    assert flat(new_state, "m").tolist() == pytest.approx(m.tolist(), rel=1e-6)
    assert new_state["step"].item() == step + 1


def test_fafed_server_averages_x_m_v_uniformly():
    strategy = fafed()
    state = server_state(strategy, ("m", "v"))
    new, _, _ = play_round(strategy, state, round=3)
    assert set(new.optimizer) == {"m", "v"}  # the step count is not kept: every device derives it
    ends = {d: adamw_from(d, 4, E) for d in DATA}
    for got, index in ((new.params, 0), (new.optimizer["m"], 1), (new.optimizer["v"], 2)):
        mean = (ends[0][index] + ends[1][index]) / 2
        weighted = (3 * ends[0][index] + ends[1][index]) / 4
        torch.testing.assert_close(flat(got), mean, rtol=1e-5, atol=1e-7)
        assert not torch.allclose(flat(got), weighted, rtol=0, atol=1e-4)


# ------------------------------------------------------------------------------------------- configs

def build_of(local_steps):
    client = LocalSGD(lr=0.001, local_epochs=1, batch_size=32, local_steps=local_steps)
    return SimpleNamespace(up=Dense("float32"), down=Dense("float32"), client=client)


def test_configs_build_the_papers_strategies():
    schedule = build_of(5).client.schedule()
    lion = strategy_of(FedLionConfig(name="fedlion"), build_of(5))
    assert lion == FedLion(LocalLion(**schedule, beta1=0.9, beta2=0.99), IntegerDelta(5, ("m",)))
    assert lion.uniform and lion.client.weight_decay == 0 and lion.up.bits_per_entry == 4  # ceil(log2 11)
    assert lion.up.nbytes({"w": torch.Size([10])}) == math.ceil(10 * 4 / 8) + 40
    assert strategy_of(FedLionConfig(name="fedlion"), build_of(10)).up == IntegerDelta(10, ("m",))
    mfl = strategy_of(MFLConfig(name="mfl"), build_of(5))
    assert mfl == MFL(LocalSGD(**schedule, momentum=0.9), Dense("float32", ("", "m"))) and mfl.uniform
    assert strategy_of(MFLConfig(name="mfl"), build_of(None)).client.local_steps is None  # MFL needs no fixed E
    fafed_ = strategy_of(FAFEDConfig(name="fafed"), build_of(5))
    assert fafed_ == FAFED(LocalAdam(**schedule, beta1=0.9, beta2=0.99, eps=1e-6, decoupled=True),
                           Dense("float32", ("", "m", "v")))
    assert fafed_.uniform and fafed_.client.bias_correction and fafed_.client.weight_decay == 0


# ------------------------------------------------------------------------------------------- end to end

D = FEATURES * CLASSES + CLASSES  # logreg: 21 entries
LEARNED = ["train_loss", "accuracy", "loss"]


@pytest.mark.parametrize("name", ["fedlion", "fafed"])
def test_missing_local_steps_is_one_line_error(monkeypatch, name):
    monkeypatch.setitem(DATASETS, "tiny_blobs", tiny_blobs)
    raw = tiny_scenario({"name": name}, client={"lr": 0.01, "batch_size": 10})
    with pytest.raises(TestbedError) as err:
        sc.build(sc.validate(raw, "test"))
    message = str(err.value)
    assert "\n" not in message and message.startswith("test: client.local_steps:") and name in message
    sc.build(sc.validate(tiny_scenario({"name": "mfl"}, client={"lr": 0.01, "batch_size": 10}), "test"))  # MFL builds


def test_cli_run_without_local_steps_exits_2_with_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(DATASETS, "tiny_blobs", tiny_blobs)
    path = tmp_path / "fedlion.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario({"name": "fedlion"}, client={"lr": 0.01, "batch_size": 10})))
    assert cli.main(["run", str(path), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"error: {path}: client.local_steps: fedlion") and "set client.local_steps" in err
    assert not (tmp_path / "runs").exists()  # nothing written


class Recording:
    """The strategy, recording each round's new server state and what every device started from."""

    def __init__(self, strategy):
        self.inner, self.states, self.starts = strategy, [], []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def init(self, params):
        state = self.inner.init(params)
        self.states.append(state)
        return state

    def start(self, task, received):
        params, opt_state = self.inner.start(task, received)
        self.starts.append((task.round, task.device, opt_state))
        return params, opt_state

    def aggregate(self, state, round, arrivals, failures):
        new, metrics = self.inner.aggregate(state, round, arrivals, failures)
        self.states.append(new)
        return new, metrics


@pytest.fixture(scope="module")
def run():
    done = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(DATASETS, "tiny_blobs", tiny_blobs)

        def simulate(algorithm: dict, executor="serial"):
            key = (tuple(sorted(algorithm.items())), executor)
            if key not in done:
                done[key] = run_recorded(tiny_scenario(algorithm, executor), Recording)
            return done[key]

        yield simulate


@pytest.mark.parametrize("name, kind, parts, up_bytes, down_bytes", [
    ("fedlion", FedLion, ("m",), math.ceil(D * 3 / 8) + 4 * D, 8 * D),   # b = ceil(log2 7) = 3: 8 + 84 = 92
    ("mfl", MFL, ("m",), 8 * D, 8 * D),
    ("fafed", FAFED, ("m", "v"), 12 * D, 12 * D),
])
def test_end_to_end_bytes_and_executors_agree(run, name, kind, parts, up_bytes, down_bytes):
    assert math.ceil(D * 3 / 8) + 4 * D == 92 and IntegerDelta(3).bits_per_entry == 3
    rounds, recording, events = run({"name": name})
    strategy = recording.inner
    assert type(strategy) is kind and strategy.client.local_steps == 3 and strategy.client.lr == 0.01
    assert len(rounds) == 2 and (rounds.arrived == 2).all()
    assert (rounds.bytes_up == 2 * up_bytes).all() and (rounds.bytes_down == 2 * down_bytes).all()
    # per device: TWO_DEVICES' links (0.25 s, 87,360 / 43,680 B/s and 0.5 s, 174,720 B/s both ways)
    seconds = (events.end_s - events.start_s).groupby([events.device, events.phase]).apply(list)
    for device, latency, down_Bps, up_Bps in ((0, 0.25, 87_360, 43_680), (1, 0.5, 174_720, 174_720)):
        assert seconds[device, "upload"] == pytest.approx([latency + up_bytes / up_Bps] * 2, abs=1e-9)
        assert seconds[device, "download"] == pytest.approx([latency + down_bytes / down_Bps] * 2, abs=1e-9)
    states = recording.states
    assert len(states) == 3 and all(set(s.optimizer) == set(parts) for s in states)
    assert any(bool((t != 0).any()) for t in states[-1].optimizer["m"].values())
    if name == "fedlion":  # x_r = x_{r-1} - gamma (Delta_0 + Delta_1) / 2 with integer Deltas in [-3, 3]
        for old, new in zip(states, states[1:]):
            for n in old.params:
                twice = 2 * (old.params[n] - new.params[n]) / 0.01
                assert torch.allclose(twice, twice.round(), atol=1e-3) and twice.round().abs().max() <= 6
            assert any(bool((old.params[n] != new.params[n]).any()) for n in old.params)
    if name == "fafed":  # the step count each device starts from: (r - 1) E
        assert sorted((r, d, s["step"].item()) for r, d, s in recording.starts) == \
            [(1, 0, 0.0), (1, 1, 0.0), (2, 0, 3.0), (2, 1, 3.0)]
    batched, batched_recording, batched_events = run({"name": name}, executor="batched")
    pd.testing.assert_frame_equal(events, batched_events, check_exact=True)
    pd.testing.assert_frame_equal(rounds.drop(columns=LEARNED), batched.drop(columns=LEARNED), check_exact=True)
    for column in LEARNED:  # vmapped and plain autograd round differently in the last float bits
        np.testing.assert_allclose(rounds[column], batched[column], rtol=1e-5, atol=1e-6)
    for x, y in zip(states, batched_recording.states):
        for n in x.params:
            torch.testing.assert_close(x.params[n], y.params[n], rtol=1e-5, atol=1e-7)
            for part in parts:
                torch.testing.assert_close(x.optimizer[part][n], y.optimizer[part][n], rtol=1e-5, atol=1e-8)


def test_mfl_refuses_momentum_zero_which_is_fedavg(two_devices):
    """Without momentum there is no buffer to average: the schema says so instead of crashing in round 1."""
    from testbed.errors import TestbedError
    from testbed.scenario import validate

    with pytest.raises(TestbedError, match="algorithm.momentum: Input should be greater than 0"):
        validate({**two_devices, "algorithm": {"name": "mfl", "momentum": 0.0}})


def test_validate_already_asks_fedlion_for_local_steps(two_devices):
    from testbed.errors import TestbedError
    from testbed.scenario import validate

    with pytest.raises(TestbedError, match="client.local_steps: fedlion counts its local steps"):
        validate({**two_devices, "algorithm": {"name": "fedlion"}})
