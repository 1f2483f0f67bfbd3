"""Parameter tracking (testbed/algorithms/tracking.py, specs/fadamgt.md): FAdamGT, FAdamET, LocalAdam and SCAFFOLD
option II, checked against Algorithm 1 computed by hand.

The hand rounds: a model of d = 3 entries (weight 1x2, bias 1; flattened order w0 w1 b) and the quadratic loss
0.5 ||p - t||^2 with t the mean of the minibatch's rows, so the gradient is g = p - t. Two devices hold 2 and 1
samples (batch size 10: every local step is a full batch), K = 2 local steps with eta = 0.1, b1 = 0.9, b2 = 0.99 and
eps = 1e-3 (large enough to tell sqrt(vhat) + eps from sqrt(vhat + eps)), from
    x = [0.5, -0.5, 1.0],   y = [0.2, -0.1, 0.0]
    device A (0): t = [1.5, -1.0, 0.0],  y_A = [0.05, 0.1, -0.3],  v_A = [0.04, 0.0, 4.0]
    device B (1): t = [-1.0, 0.5, 2.0],  y_B = [-0.2, 0.0, 0.1],   v_B = [9.0, 0.09, 0.0]
v_A's bias and v_B's w0 are large, so there v decays below v_i and the AMSGrad max keeps vhat = v_i.
FAdamGT, device A, w0 written out (y - y_A = 0.15):
    k = 1: g = -1, ghat = -0.85, m = -0.085, v = 0.99 0.04 + 0.01 0.7225 = 0.046825 = vhat,
           D = -0.085 / (sqrt(0.046825) + 0.001) = -0.391001, x = 0.5 + 0.0391001 = 0.5391001
    k = 2: g = -0.9609, ghat = -0.8109, m = -0.15759, v = 0.0529323, D = -0.682000, x = 0.6073001
    y_A' = (g_1 + g_2) / 2 = -0.98045 (raw gradients, without the 0.15)
SCAFFOLD, device A, w0 (c - c_A = 0.15): x = 0.5 + 0.1 0.85 = 0.585, then 0.585 + 0.1 0.765 = 0.6615, and
    c_A' = c_A - c + (0.5 - 0.6615) / (2 0.1) = -0.15 - 0.8075 = -0.9575 = (-1 - 0.915) / 2, the mean raw gradient.
"""
import math

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import (TINY_CLASSES as CLASSES, TINY_FEATURES as FEATURES, run_recorded, tiny_blobs,
                     tiny_scenario)

from testbed import scenario as sc
from testbed.algorithms.base import Arrival, RoundContext, ServerState, select_uniform
from testbed.algorithms.tracking import Tracking
from testbed.data import DATASETS
from testbed.local import LocalAdam, LocalSGD, train_one
from testbed.payload import Dense, transmit

SHAPES = {"weight": torch.Size([1, 2]), "bias": torch.Size([1])}
X0, Y0 = [0.5, -0.5, 1.0], [0.2, -0.1, 0.0]
DATA = {0: [[1.0, -1.5, 0.5], [2.0, -0.5, -0.5]], 1: [[-1.0, 0.5, 2.0]]}  # device: rows (their mean is t)
TARGET = {0: [1.5, -1.0, 0.0], 1: [-1.0, 0.5, 2.0]}
V_KEPT = {0: [0.04, 0.0, 4.0], 1: [9.0, 0.09, 0.0]}
Y_KEPT = {0: [0.05, 0.1, -0.3], 1: [-0.2, 0.0, 0.1]}
LR, B1, B2, EPS, K = 0.1, 0.9, 0.99, 1e-3, 2
FLEET = 4                       # n: y moves by 1/n of the tracked changes
SAMPLES = np.array([2, 1, 5, 5])
TRACKED_BY_SEED = {0: 1, 1: 0}  # strategy stream's seed -> the device it tracks when S = {0, 1}, |Y| = 1
TOL = dict(rel=1e-5, abs=1e-6)


def as_params(flat: list[float]) -> dict[str, torch.Tensor]:
    return {"weight": torch.tensor([flat[:2]]), "bias": torch.tensor(flat[2:])}


def flat(tensors: dict[str, torch.Tensor], part: str = "") -> list[float]:
    key = lambda n: n if part == "" else f"{part}:{n}"  # noqa: E731
    return torch.cat([tensors[key(n)].reshape(-1) for n in SHAPES]).tolist()


def keyed(part: str, values: list[float]) -> dict[str, torch.Tensor]:
    return {f"{part}:{n}": t for n, t in as_params(values).items()}


def loss_fn(params, x, y):
    p = torch.cat([params["weight"].reshape(-1), params["bias"].reshape(-1)])
    return 0.5 * (p - x.mean(0)).square().sum(), torch.zeros(())


def by_hand(mode: str, device: int, y=Y0, y_i=None, v_i=None) -> dict[str, list[float]]:
    """Algorithm 1 (or SCAFFOLD option II) for one device in plain floats, entry by entry:
    {x: after K steps, v: second moment, y: y_i' if tracked, g: mean raw gradient, D: mean Adam direction}."""
    y_i = Y_KEPT[device] if y_i is None else y_i
    v_i = V_KEPT[device] if v_i is None else v_i
    out = {"x": [], "v": [], "y": [], "g": [], "D": []}
    for x0, t, yy, yi, vi in zip(X0, TARGET[device], y, y_i, v_i):
        gap = yy - yi
        x, m, v, vhat, gsum, dsum = x0, 0.0, vi, vi, 0.0, 0.0
        for _ in range(K):
            g = x - t
            if mode == "scaffold":
                x -= LR * (g + gap)                    # g - c_i + c
            else:
                ghat = g + gap if mode == "gt" else g  # FAdamGT: corrected before the moments
                m = B1 * m + (1 - B1) * ghat
                v = B2 * v + (1 - B2) * ghat * ghat
                vhat = max(vhat, v)
                d = m / (math.sqrt(vhat) + EPS)
                x -= LR * (d + gap) if mode == "et" else LR * d  # FAdamET: corrected after them
                dsum += d
            gsum += g
        out["x"].append(x)
        out["v"].append(v)
        out["g"].append(gsum / K)
        out["D"].append(dsum / K)
        out["y"].append(gsum / K if mode == "gt" else yi - yy + (x0 - x) / (K * LR))
    return out


def tracking(mode: str, fraction=0.5, server_lr=1.0, dtype="float32") -> Tracking:
    client = LocalSGD(lr=LR, batch_size=10, local_steps=K) if mode == "scaffold" else \
        LocalAdam(lr=LR, batch_size=10, local_steps=K, beta1=B1, beta2=B2, eps=EPS, bias_correction=False,
                  amsgrad=True)
    return Tracking(client, mode, fraction, server_lr, FLEET, dtype, dtype)


def server_state(strategy: Tracking, y=Y0, kept_y=True) -> ServerState:
    """x = X0, the given y, and what devices 0 and 1 kept from an earlier participation."""
    state = strategy.init(as_params(X0))
    assert list(state.optimizer) == ["y"] and all(float(t.abs().sum()) == 0 for t in state.optimizer["y"].values())
    clients = {d: keyed("v", V_KEPT[d]) | (keyed("y", Y_KEPT[d]) if kept_y else {}) for d in DATA}
    return ServerState(state.params, {"y": as_params(y)}, clients)


def configure(strategy, state, seed=0, online=(0, 1), n_select=2, round=1):
    ctx = RoundContext(round, np.array(online), n_select, SAMPLES, None, np.random.default_rng(seed))
    return strategy.configure(state, ctx, np.random.default_rng(100 + seed))


def train(strategy, state, task):
    """One device's part as the engine plays it: download, start, K local steps, finish.
    -> (received, start state, end state, Result)"""
    received = transmit(task.down, strategy.broadcast(state), SHAPES)
    params, start = strategy.start(task, received)
    x = torch.tensor(DATA[task.device])
    trained, stats, end = train_one(strategy.objective(loss_fn), params, x, torch.zeros(len(x)), strategy.client,
                                    np.random.default_rng(task.device), task.extras,
                                    None if start is None else dict(start))
    return received, start, end, strategy.finish(task, trained, received, stats, end)


def play_round(strategy, state, seed=0):
    """Devices 0 and 1, uploads through their codecs, aggregation. -> (tasks, results, arrivals, new state)"""
    tasks = {t.device: t for t in configure(strategy, state, seed)}
    assert sorted(tasks) == [0, 1]
    results, arrivals = {}, []
    for d, task in tasks.items():
        results[d] = train(strategy, state, task)[3]
        assert len(task.up.encode(results[d].update)) == task.up.nbytes(SHAPES)
        arrivals.append(Arrival(d, task.num_samples, transmit(task.up, results[d].update, SHAPES),
                                results[d].metrics, results[d].local_state))
    new, metrics = strategy.aggregate(state, 1, arrivals, [])
    assert set(metrics) == {"train_loss"}
    return tasks, results, arrivals, new


# ------------------------------------------------------------------------------------------- the hand rule

def test_hand_rule_written_out():
    """The docstring's numbers: the hand function itself."""
    gt = by_hand("gt", 0)
    assert gt["x"][0] == pytest.approx(0.6073001, abs=1e-7) and gt["v"][0] == pytest.approx(0.0529323, abs=1e-7)
    assert gt["y"][0] == pytest.approx((-1.0 - 0.9608999) / 2, abs=1e-7)
    assert gt["y"] == gt["g"]
    # the AMSGrad max: v decays below v_A = 4 at the bias, so vhat stays 4
    assert gt["v"][2] < 4.0 and gt["x"][2] == pytest.approx(1.0 - LR * (0.13 / 2.001 + 0.2463503 / 2.001), abs=1e-7)
    et = by_hand("et", 0)
    assert et["y"] == pytest.approx(et["D"], abs=1e-12)  # FAdamET: y_i' is the mean Adam direction
    scaffold = by_hand("scaffold", 0)
    assert scaffold["x"] == pytest.approx([0.6615, -0.557, 0.753])
    assert scaffold["y"] == pytest.approx(scaffold["g"], abs=1e-12) and scaffold["y"][0] == pytest.approx(-0.9575)


# ------------------------------------------------------------------------------------------- FAdamGT, FAdamET

@pytest.mark.parametrize("mode", ["gt", "et"])
@pytest.mark.parametrize("seed", [0, 1])
def test_device_round_by_hand(mode, seed):
    """One round of both devices from a preset (x, y, y_i, v_i): one of them tracked (|Y| = ceil(0.5 * 2) = 1)."""
    strategy = tracking(mode)
    assert strategy.adaptive
    state = server_state(strategy)
    sent = strategy.broadcast(state)
    assert list(sent) == ["weight", "bias", "y:weight", "y:bias"] and flat(sent, "y") == pytest.approx(Y0)
    tasks = configure(strategy, state, seed)
    assert [t.device for t in tasks] == [0, 1]
    for task in tasks:
        d, tracked = task.device, task.device == TRACKED_BY_SEED[seed]
        assert bool(task.extras["tracked"]) is tracked
        assert task.down == Dense("float32", ("", "y")) and task.down.nbytes(SHAPES) == 8 * 3
        assert task.up == Dense("float32", ("", "y") if tracked else ("",))
        assert task.up.nbytes(SHAPES) == (8 if tracked else 4) * 3
        assert flat(task.local, "v") == pytest.approx(V_KEPT[d]) and flat(task.local, "y") == pytest.approx(Y_KEPT[d])
        gap = [a - b for a, b in zip(Y0, Y_KEPT[d])]
        assert flat(task.extras["gap"]) == pytest.approx(gap)

        received, start, end, result = train(strategy, state, task)
        # the device starts with m = 0 and v = vhat = v_i
        assert all(v == 0 for v in flat(start, "m")) and start["step"].item() == 0
        assert flat(start, "v") == pytest.approx(V_KEPT[d]) and flat(start, "vmax") == pytest.approx(V_KEPT[d])
        if mode == "et":
            assert flat(start, "shift") == pytest.approx(gap) and not any(k.startswith("gsum:") for k in start)
        else:
            assert all(v == 0 for v in flat(start, "gsum")) and not any(k.startswith("shift:") for k in start)

        hand = by_hand(mode, d)
        x = [a + b for a, b in zip(X0, flat(result.update))]
        assert x == pytest.approx(hand["x"], **TOL)
        assert flat(end, "v") == pytest.approx(hand["v"], **TOL)
        # v_i' = v (not vhat, not the max) is what the device keeps; vmax is not kept
        assert set(result.local_state) == {"v:weight", "v:bias", "y:weight", "y:bias"}
        assert flat(result.local_state, "v") == pytest.approx(hand["v"], **TOL)
        if tracked:
            assert set(result.update) == {"weight", "bias", "y:weight", "y:bias"}
            assert flat(result.local_state, "y") == pytest.approx(hand["y"], **TOL)
            expected = hand["g"] if mode == "gt" else hand["D"]  # GT: the mean RAW gradient; ET: the mean D_k
            assert flat(result.local_state, "y") == pytest.approx(expected, **TOL)
            delta = [a - b for a, b in zip(hand["y"], Y_KEPT[d])]
            assert flat(result.update, "y") == pytest.approx(delta, **TOL)
        else:  # untracked: uploads only x_i - x and keeps its stale y_i
            assert set(result.update) == {"weight", "bias"}
            assert all(torch.equal(result.local_state[f"y:{n}"], task.local[f"y:{n}"]) for n in SHAPES)
        assert len(task.up.encode(result.update)) == task.up.nbytes(SHAPES)


def test_gt_and_et_differ_where_the_correction_enters():
    """Same start, same data: GT's x differs from ET's (the correction before vs after the moments)."""
    gt, et = by_hand("gt", 0), by_hand("et", 0)
    assert abs(gt["x"][0] - et["x"][0]) > 1e-3
    for mode, hand in (("gt", gt), ("et", et)):
        strategy = tracking(mode, fraction=1.0)
        state = server_state(strategy)
        task = configure(strategy, state, online=(0,), n_select=1)[0]
        result = train(strategy, state, task)[3]
        assert [a + b for a, b in zip(X0, flat(result.update))] == pytest.approx(hand["x"], **TOL)


@pytest.mark.parametrize("mode", ["gt", "et"])
def test_server_round_gt_et(mode):
    strategy = tracking(mode, server_lr=0.5)
    state = server_state(strategy)
    tasks, results, arrivals, new = play_round(strategy, state, seed=0)
    tracked = TRACKED_BY_SEED[0]
    hands = {d: by_hand(mode, d) for d in DATA}
    mean_dx = [(a + b) / 2 - x for a, b, x in zip(hands[0]["x"], hands[1]["x"], X0)]  # uniform: 2 vs 1 samples
    assert flat(new.params) == pytest.approx([x + 0.5 * s for x, s in zip(X0, mean_dx)], **TOL)
    dy = [a - b for a, b in zip(hands[tracked]["y"], Y_KEPT[tracked])]
    assert flat(new.optimizer["y"]) == pytest.approx([y + s / FLEET for y, s in zip(Y0, dy)], **TOL)
    assert flat(new.clients[tracked], "y") == pytest.approx(hands[tracked]["y"], **TOL)
    assert flat(new.clients[1 - tracked], "y") == flat(keyed("y", Y_KEPT[1 - tracked]), "y")  # exactly
    for d in DATA:
        assert flat(new.clients[d], "v") == pytest.approx(hands[d]["v"], **TOL)


# ------------------------------------------------------------------------------------------- SCAFFOLD

def test_scaffold_round_by_hand():
    strategy = tracking("scaffold", fraction=1.0, server_lr=0.5)  # as ScaffoldConfig builds it
    assert strategy.mode == "scaffold" and not strategy.adaptive
    state = server_state(strategy)
    tasks, results, arrivals, new = play_round(strategy, state, seed=0)
    hands = {d: by_hand("scaffold", d) for d in DATA}
    for d, task in tasks.items():
        assert bool(task.extras["tracked"])  # every sampled device tracks
        assert task.down == task.up == Dense("float32", ("", "y")) and task.up.nbytes(SHAPES) == 8 * 3
        assert set(task.local) == {"y:weight", "y:bias"}  # no second moment
        _, start, end, _ = train(strategy, state, task)
        assert start is None and end == {}
        res = results[d]
        assert [a + b for a, b in zip(X0, flat(res.update))] == pytest.approx(hands[d]["x"], **TOL)
        # c_i' = c_i - c + (x - x_i) / (K eta) is the mean raw gradient
        assert flat(res.local_state, "y") == pytest.approx(hands[d]["y"], **TOL)
        assert flat(res.local_state, "y") == pytest.approx(hands[d]["g"], **TOL)
        assert flat(res.update, "y") == pytest.approx([a - b for a, b in zip(hands[d]["g"], Y_KEPT[d])], **TOL)
        assert set(res.local_state) == {"y:weight", "y:bias"}
    assert flat(results[0].local_state, "y") == pytest.approx([-0.9575, 0.485, 0.935], **TOL)
    mean_dx = [(a + b) / 2 - x for a, b, x in zip(hands[0]["x"], hands[1]["x"], X0)]
    assert flat(new.params) == pytest.approx([x + 0.5 * s for x, s in zip(X0, mean_dx)], **TOL)
    dc = [a - b + c - e for a, b, c, e in zip(hands[0]["g"], Y_KEPT[0], hands[1]["g"], Y_KEPT[1])]
    assert flat(new.optimizer["y"]) == pytest.approx([c + s / FLEET for c, s in zip(Y0, dc)], **TOL)


# ------------------------------------------------------------------------------------------- LocalAdam

def test_local_adam_no_tracking_and_v_carried():
    strategy = tracking("none", fraction=1.0)
    state = server_state(strategy, y=[0.0] * 3, kept_y=False)  # LocalAdam's devices never had a y_i
    assert list(strategy.broadcast(state)) == ["weight", "bias"]
    tasks, results, arrivals, new = play_round(strategy, state, seed=0)
    for d, task in tasks.items():
        assert not bool(task.extras["tracked"])
        assert task.down == task.up == Dense("float32", ("",)) and task.down.nbytes(SHAPES) == 4 * 3
        _, start, _, _ = train(strategy, state, task)
        assert not any(k.startswith(("shift:", "gsum:")) for k in start)
        assert flat(start, "v") == pytest.approx(V_KEPT[d]) and flat(start, "vmax") == pytest.approx(V_KEPT[d])
        hand = by_hand("none", d, y=[0.0] * 3, y_i=[0.0] * 3)
        assert set(results[d].update) == {"weight", "bias"}
        assert [a + b for a, b in zip(X0, flat(results[d].update))] == pytest.approx(hand["x"], **TOL)
        assert flat(results[d].local_state, "v") == pytest.approx(hand["v"], **TOL)
        assert flat(new.clients[d], "v") == pytest.approx(hand["v"], **TOL)
    assert all(v == 0 for v in flat(new.optimizer["y"]))
    # with the moments reset to v = 0 instead the step differs: v_i is used
    assert by_hand("none", 0, y=[0.0] * 3, y_i=[0.0] * 3, v_i=[0.0] * 3)["x"][2] != \
        pytest.approx(by_hand("none", 0, y=[0.0] * 3, y_i=[0.0] * 3)["x"][2], abs=1e-4)


# ------------------------------------------------------------------------------------------- aggregate

def test_aggregate_by_hand_three_arrivals_two_tracked():
    """x += eta_g * uniform mean of the 3 deltas; y += (1/n) * sum of the 2 tracked y changes; kept state stored."""
    strategy = tracking("gt", server_lr=0.5)
    x0, y0 = [1.0, 2.0, -1.0], [0.4, -0.4, 0.8]
    old = {d: keyed("v", [0.1 * d] * 3) | keyed("y", [0.2 * d] * 3) for d in range(4)}
    state = ServerState(as_params(x0), {"y": as_params(y0)}, dict(old))
    dx = {0: [0.3, -0.6, 0.9], 2: [0.0, 0.3, -0.3], 3: [-0.6, 0.0, 0.6]}
    dy = {0: [1.0, -2.0, 0.5], 3: [-0.2, 0.6, 1.5]}      # device 2 is untracked
    kept = {0: keyed("v", [7.0] * 3) | keyed("y", [1.0, -2.0, 0.5]),
            2: keyed("v", [8.0] * 3) | old[2],            # untracked: its old y_i
            3: keyed("v", [9.0] * 3) | keyed("y", [0.4, 1.2, 2.1])}
    samples, losses = {0: 2, 2: 1, 3: 5}, {0: 1.0, 2: 2.0, 3: 4.0}
    arrivals = [Arrival(d, samples[d], as_params(dx[d]) | (keyed("y", dy[d]) if d in dy else {}),
                        {"train_loss": losses[d], "train_accuracy": 0.0}, kept[d]) for d in (0, 2, 3)]
    new, metrics = strategy.aggregate(state, 1, arrivals, [])
    assert flat(new.params) == pytest.approx([1.0 + 0.5 * -0.1, 2.0 + 0.5 * -0.1, -1.0 + 0.5 * 0.4], **TOL)
    assert flat(new.optimizer["y"]) == pytest.approx([0.4 + 0.8 / 4, -0.4 - 1.4 / 4, 0.8 + 2.0 / 4], **TOL)
    assert list(new.optimizer) == ["y"]
    for d in (0, 2, 3):
        assert new.clients[d] is kept[d]
    assert flat(new.clients[2], "y") == flat(old[2], "y")
    assert new.clients[1] is old[1]  # not sampled: untouched
    assert metrics["train_loss"] == pytest.approx((2 * 1.0 + 1 * 2.0 + 5 * 4.0) / 8)
    assert flat(state.params) == x0 and flat(state.optimizer["y"]) == pytest.approx(y0)  # not modified in place
    assert strategy.aggregate(new, 2, [], []) == (new, {})


# ------------------------------------------------------------------------------------------- tracking subset

def picked(n_select: int) -> np.ndarray:
    """A selection of n_select of the 10 devices, as the uniform selector makes it (testbed/selection/)."""
    return select_uniform(np.arange(10), n_select, np.random.default_rng(0))


@pytest.mark.parametrize("fraction, n_select, expected", [(0.5, 7, 4), (0.3, 7, 3), (0.1, 7, 1), (1.0, 7, 7),
                                                          (0.5, 10, 5), (0.5, 2, 1)])
def test_tracking_subset_size_and_stream(fraction, n_select, expected):
    strategy = tracking("gt", fraction=fraction)
    state = strategy.init(as_params(X0))
    draws = []
    for seed in (3, 3, 4):
        ctx = RoundContext(1, np.arange(10), n_select, np.full(10, 2), None, np.random.default_rng(seed),
                           selected=picked(n_select))
        tasks = strategy.configure(state, ctx, np.random.default_rng(0))
        chosen = [t.device for t in tasks]
        tracked = {t.device for t in tasks if bool(t.extras["tracked"])}
        assert len(chosen) == n_select and len(tracked) == expected == math.ceil(fraction * n_select)
        assert tracked <= set(chosen)
        for t in tasks:
            assert t.up.parts == (("", "y") if t.device in tracked else ("",))
        # drawn from the strategy's stream, not from selection's
        assert tracked == set(np.random.default_rng(seed).choice(chosen, size=expected, replace=False).tolist())
        draws.append((chosen, tracked))
    assert draws[0] == draws[1]                      # deterministic for a seed
    assert draws[0][0] == draws[2][0]                # the same selection whatever the strategy stream
    if 0 < expected < n_select:
        other = [{t.device for t in strategy.configure(state, RoundContext(
            1, np.arange(10), n_select, np.full(10, 2), None, np.random.default_rng(s), selected=picked(n_select)),
            np.random.default_rng(0))
            if bool(t.extras["tracked"])} for s in range(5, 15)]
        assert len({frozenset(o) for o in other}) > 1  # the stream decides who tracks


@pytest.mark.parametrize("mode, fraction, expected", [("scaffold", 1.0, 7), ("none", 0.5, 0), ("none", 1.0, 0)])
def test_scaffold_tracks_all_local_adam_none(mode, fraction, expected):
    """SCAFFOLD as ScaffoldConfig builds it (track_fraction 1): all of S; LocalAdam: nobody, whatever the fraction."""
    strategy = tracking(mode, fraction=fraction)
    ctx = RoundContext(1, np.arange(10), 7, np.full(10, 2), None, np.random.default_rng(0), selected=picked(7))
    tasks = strategy.configure(strategy.init(as_params(X0)), ctx, np.random.default_rng(0))
    assert sum(bool(t.extras["tracked"]) for t in tasks) == expected


@pytest.mark.parametrize("fraction, n_select, expected", [(0.14, 50, 7), (0.55, 100, 55)])
def test_tracking_subset_size_exact_fractions(fraction, n_select, expected):
    strategy = tracking("gt", fraction=fraction)
    ctx = RoundContext(1, np.arange(n_select), n_select, np.full(n_select, 2), None, np.random.default_rng(0))
    tasks = strategy.configure(strategy.init(as_params(X0)), ctx, np.random.default_rng(0))
    assert sum(bool(t.extras["tracked"]) for t in tasks) == expected


# ------------------------------------------------------------------------------------------- lossy downlink

def test_correction_uses_the_received_y():
    strategy = tracking("et", fraction=1.0, dtype="float16")
    state = server_state(strategy)  # y = 0.2, -0.1 are not fp16 numbers
    task = configure(strategy, state, online=(0,), n_select=1)[0]
    received, start, _, result = train(strategy, state, task)
    assert received["y:weight"][0, 0].item() != pytest.approx(0.2, abs=1e-6)
    for n in SHAPES:
        assert torch.equal(start[f"shift:{n}"], received[f"y:{n}"] - task.local[f"y:{n}"])


# ------------------------------------------------------------------------------------------- end to end

D = FEATURES * CLASSES + CLASSES  # logreg: 21 entries
LEARNED = ["train_loss", "accuracy", "loss"]
ROUNDS = 3
LINKS = {0: (0.25, 87_360, 43_680), 1: (0.5, 174_720, 174_720)}  # TWO_DEVICES: latency, down_Bps, up_Bps


def scenario(algorithm: dict, executor="serial", codec=None) -> dict:
    return tiny_scenario(algorithm, executor, rounds=ROUNDS, codec=codec)


class Recording:
    """The strategy, recording its tasks, each device's start and kept state, and the server state after each
    round (the per-device store copied: aggregate updates it in place)."""

    def __init__(self, strategy):
        self.inner, self.tasks, self.starts, self.kept, self.states = strategy, [], {}, {}, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def configure(self, state, ctx, rng):
        tasks = self.inner.configure(state, ctx, rng)
        self.tasks += tasks
        return tasks

    def start(self, task, received):
        params, opt_state = self.inner.start(task, received)
        self.starts[task.round, task.device] = opt_state
        return params, opt_state

    def finish(self, task, trained, received, stats, opt_state):
        result = self.inner.finish(task, trained, received, stats, opt_state)
        self.kept[task.round, task.device] = result.local_state
        return result

    def aggregate(self, state, round, arrivals, failures):
        new, metrics = self.inner.aggregate(state, round, arrivals, failures)
        self.states.append((new.params, dict(new.optimizer["y"]), {d: dict(s) for d, s in new.clients.items()}))
        return new, metrics


def names(task) -> list[str]:
    """The model's parameter names, read from the y_i the device kept."""
    return [k.split(":", 1)[1] for k in task.local if k.startswith("y:")]


@pytest.fixture(scope="module")
def run():
    done = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(DATASETS, "tiny_blobs", tiny_blobs)

        def simulate(name: str, executor="serial"):
            if (name, executor) not in done:
                done[name, executor] = run_recorded(scenario({"name": name}, executor), Recording)
            return done[name, executor]

        yield simulate


def test_configs_build_the_papers_strategies(run):
    adam = LocalAdam(lr=0.01, local_epochs=1, batch_size=10, local_steps=3, beta1=0.9, beta2=0.99, eps=1e-8,
                     weight_decay=1e-8, bias_correction=False, amsgrad=True)
    for name, mode in (("fadamgt", "gt"), ("fadamet", "et"), ("localadam", "none")):
        assert run(name)[1].inner == Tracking(adam, mode, 0.5, 1.0, 2, "float32")
    assert run("scaffold")[1].inner == Tracking(LocalSGD(lr=0.01, local_epochs=1, batch_size=10, local_steps=3),
                                                "scaffold", 1.0, 1.0, 2, "float32")


@pytest.mark.parametrize("name, n_tracked", [("fadamgt", 1), ("fadamet", 1), ("localadam", 0), ("scaffold", 2)])
def test_end_to_end_bytes_state_and_executors_agree(run, name, n_tracked):
    rounds, rec, events = run(name)
    strategy = rec.inner
    assert len(rounds) == ROUNDS and (rounds.arrived == 2).all()
    tracked = {(t.round, t.device): bool(t.extras["tracked"]) for t in rec.tasks}
    assert len(tracked) == 2 * ROUNDS
    for r in range(1, ROUNDS + 1):
        assert sum(tracked[r, d] for d in LINKS) == n_tracked
    # bytes: down 8d (x and y; LocalAdam 4d); up 8d tracked, 4d untracked
    down = (4 if name == "localadam" else 8) * D
    up = {key: (8 if t else 4) * D for key, t in tracked.items()}
    assert (rounds.bytes_down == 2 * down).all()
    assert rounds.bytes_up.tolist() == [up[r, 0] + up[r, 1] for r in range(1, ROUNDS + 1)]
    seconds = (events.end_s - events.start_s).groupby([events["device"], events["round"], events["phase"]]).first()
    for (r, d), nbytes in up.items():
        latency, down_Bps, up_Bps = LINKS[d]
        assert seconds[d, r, "upload"] == pytest.approx(latency + nbytes / up_Bps, abs=1e-9)
        assert seconds[d, r, "download"] == pytest.approx(latency + down / down_Bps, abs=1e-9)
    # what each device kept from its previous participation is what it starts from
    for r in range(1, ROUNDS + 1):
        for d in LINKS:
            task = next(t for t in rec.tasks if (t.round, t.device) == (r, d))
            kept = rec.kept[r, d]
            before = rec.kept.get((r - 1, d), {})
            for n in task.local:
                expected = before[n] if r > 1 else torch.zeros_like(task.local[n])
                assert torch.equal(task.local[n], expected)
            if strategy.adaptive:  # v_i: zero at first, then the previous round's v, with vhat = v_i
                start = rec.starts[r, d]
                for n in names(task):
                    assert torch.equal(start[f"v:{n}"], task.local[f"v:{n}"])
                    assert torch.equal(start[f"vmax:{n}"], task.local[f"v:{n}"])
                    assert torch.equal(kept[f"v:{n}"], rec.states[r - 1][2][d][f"v:{n}"])
                assert r == 1 or any(bool((task.local[f"v:{n}"] != 0).any()) for n in names(task))
            else:
                assert rec.starts[r, d] is None and not any(k.startswith("v:") for k in task.local)
            if not tracked[r, d]:  # an untracked device keeps its y_i
                for n in names(task):
                    assert torch.equal(kept[f"y:{n}"], task.local[f"y:{n}"])
    # y = (1/n) sum_i y_i holds (zeros at the start; here n = 2 and both devices take part)
    for _, y, clients in rec.states:
        for n in y:
            torch.testing.assert_close(y[n], (clients[0][f"y:{n}"] + clients[1][f"y:{n}"]) / 2, rtol=0, atol=1e-6)
            if name == "localadam":
                assert not y[n].any()
            elif n_tracked:
                assert y[n].any()
    # serial and batched: same clock, same subsets, the same learning up to float rounding
    b_rounds, b_rec, b_events = run(name, "batched")
    pd.testing.assert_frame_equal(events, b_events, check_exact=True)
    pd.testing.assert_frame_equal(rounds.drop(columns=LEARNED), b_rounds.drop(columns=LEARNED), check_exact=True)
    for column in LEARNED:
        np.testing.assert_allclose(rounds[column], b_rounds[column], rtol=1e-5, atol=1e-6)
    assert tracked == {(t.round, t.device): bool(t.extras["tracked"]) for t in b_rec.tasks}
    for (x, y, clients), (bx, by, bclients) in zip(rec.states, b_rec.states):
        for n in x:
            torch.testing.assert_close(x[n], bx[n], rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(y[n], by[n], rtol=1e-5, atol=1e-6)
            for d in clients:
                for k in clients[d]:
                    torch.testing.assert_close(clients[d][k], bclients[d][k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["fadamgt", "scaffold"])
def test_downlink_honours_codec_down(monkeypatch, name):
    monkeypatch.setitem(DATASETS, "tiny_blobs", tiny_blobs)
    exp = sc.build(sc.validate(scenario({"name": name}, codec={"down": "fp16", "up": "fp32"}), "test"))
    ctx = RoundContext(1, np.arange(2), 2, exp.clients.num_samples, exp.fleet, np.random.default_rng(0))
    tasks = exp.strategy.configure(exp.strategy.init(dict(exp.model.named_parameters())), ctx,
                                   np.random.default_rng(0))
    assert all(t.down == Dense("float16", ("", "y")) for t in tasks)
    assert all(t.up.dtype == "float32" for t in tasks)
