"""FedAdam with moment averaging and its sparse uplinks (testbed/algorithms/sparse_adam.py, specs/fedadam_ssm.md),
checked against numbers computed by hand.

The hand round: a linear model y ~ x . w + b with w in R^3 (d = 4 entries, flattened order w0 w1 w2 b), loss
0.5 * mean residual^2, so the gradient is mean(r x) for w and mean(r) for b. Two devices hold 3 and 1 samples
(aggregation weights 3/4 and 1/4) and take one full-batch local Adam step (no bias correction, eps inside the sqrt):
    m = b1 M + (1 - b1) g ;  v = b2 V + (1 - b2) g^2 ;  w = W - lr m / sqrt(v + eps)
with lr = 0.1, b1 = 0.9, b2 = 0.99, eps = 0.01 from
    W = [0.5, -0.5, 1.0 | 0.0],  M = [0.1, 0.0, -0.2 | 0.05],  V = [0.01, 0.04, 0.0025 | 0.09].
Device A: x = e1, e2, e3 with y = 0, 0, 2: residuals 0.5, -0.5, -1, so g_A = [1/6, -1/6, -1/3 | -1/3].
Device B: x = (0, 3, 0), y = 0: residual -1.5, so g_B = [0, -4.5, 0 | -1.5].
Then (to 4 digits)
    DW_A = [-0.0751, 0.0075, 0.1830, -0.0037]   DM_A = 0.1 (g_A - M) = [0.0067, -0.0167, -0.0133, -0.0383]
    DV_A = 0.01 (g_A^2 - V) = [0.000178, -0.000122, 0.001086, 0.000211]
    DW_B = [-0.0638, 0.0896, 0.1612, 0.0301]     DM_B = [-0.01, -0.45, 0.02, -0.155]
    DV_B = [-0.0001, 0.2021, -0.000025, 0.0216]
so with k = floor(0.5 * 4) = 2 the top-2 positions are
    |DW|: A {0, 2}, B {1, 2};  |DM|: A {1, 3}, B {1, 3};  |DV|: A {2, 3}, B {1, 3}
and under FedAdam-SSM entry 2 is kept by both devices, entry 0 by A only, entry 1 by B only, entry 3 by nobody.
"""
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import (TINY_CLASSES as CLASSES, TINY_FEATURES as FEATURES, run_recorded, tiny_blobs,
                     tiny_scenario)

from testbed.algorithms.base import Arrival, RoundContext, ServerState
from testbed.algorithms.sparse_adam import SparseFedAdam, fairness_mask
from testbed.data import DATASETS
from testbed.local import LocalAdam, LocalSGD, train_one
from testbed.payload import Dense, TopK, transmit
from testbed.schema.algorithms.adaptive import (FairnessTopConfig, FedAdamMomentsConfig, FedAdamSSMConfig,
                                                FedAdamSSMMConfig, FedAdamSSMVConfig, FedAdamTopConfig)
from testbed.strategies import strategy_of

PARTS = ("", "m", "v")
LR, B1, B2, EPS = 0.1, 0.9, 0.99, 0.01
CLIENT = LocalAdam(lr=LR, beta1=B1, beta2=B2, eps=EPS, bias_correction=False, eps_inside_sqrt=True, local_steps=1)
SHAPES = {"weight": torch.Size([1, 3]), "bias": torch.Size([1])}
W0, M0, V0 = [0.5, -0.5, 1.0, 0.0], [0.1, 0.0, -0.2, 0.05], [0.01, 0.04, 0.0025, 0.09]
DATA = {  # device: (samples, x, y)
    0: (3, [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], [0.0, 0.0, 2.0]),
    1: (1, [[0.0, 3.0, 0.0]], [0.0]),
}
GRADS = {0: [1 / 6, -1 / 6, -1 / 3, -1 / 3], 1: [0.0, -4.5, 0.0, -1.5]}  # mean(r x), mean(r), by hand


def as_params(flat: list[float]) -> dict[str, torch.Tensor]:
    return {"weight": torch.tensor([flat[:3]]), "bias": torch.tensor(flat[3:])}


def flat(tensors: dict[str, torch.Tensor], part: str = "") -> torch.Tensor:
    key = lambda n: n if part == "" else f"{part}:{n}"  # noqa: E731
    return torch.cat([tensors[key(n)].reshape(-1) for n in SHAPES])


def by_hand(device: int) -> tuple[list[float], list[float], list[float]]:
    """DW, DM, DV of one local Adam step from (W0, M0, V0), in plain floats."""
    dw, dm, dv = [], [], []
    for w, m, v, g in zip(W0, M0, V0, GRADS[device]):
        m1, v1 = B1 * m + (1 - B1) * g, B2 * v + (1 - B2) * g * g
        dw.append(-LR * m1 / math.sqrt(v1 + EPS))
        dm.append(m1 - m)
        dv.append(v1 - v)
    return dw, dm, dv


def loss_fn(params, x, y):
    residual = (x @ params["weight"].T + params["bias"]).squeeze(1) - y
    return 0.5 * residual.square().mean(), torch.zeros(())


def initial_state(strategy) -> ServerState:
    state = strategy.init(as_params(W0))
    assert all(float(t.abs().sum()) == 0 for part in ("m", "v") for t in state.optimizer[part].values())
    return ServerState(state.params, {"m": as_params(M0), "v": as_params(V0)})


def device_round(strategy, state, device):
    """One device's part of a round as the engine plays it: download, start, train, finish. -> (Result, received)"""
    task = strategy.configure(state, RoundContext(1, np.array([device]), 1, np.array([3, 1]), None),
                              np.random.default_rng(0))[0]
    assert (task.device, task.num_samples) == (device, DATA[device][0])
    received = transmit(strategy.down, strategy.broadcast(state), SHAPES)
    params, opt_state = strategy.start(task, received)
    n, x, y = DATA[device]
    trained, stats, opt_state = train_one(strategy.objective(loss_fn), params, torch.tensor(x), torch.tensor(y),
                                          strategy.client, np.random.default_rng(device), state=opt_state)
    return task, strategy.finish(task, trained, received, stats, opt_state)


def play_round(strategy, state):
    """Both devices, uploads through the codec, aggregation. -> (new state, {device: decoded update}, results)"""
    arrivals, results = [], {}
    for device in DATA:
        task, results[device] = device_round(strategy, state, device)
        arrivals.append(Arrival(device, task.num_samples, transmit(strategy.up, results[device].update, SHAPES),
                                results[device].metrics))
    new, metrics = strategy.aggregate(state, 1, arrivals, [])
    assert set(metrics) == {"train_loss"}
    return new, {a.device: a.update for a in arrivals}, results


def support(x: torch.Tensor) -> set[int]:
    return set(torch.nonzero(x.reshape(-1)).flatten().tolist())


def ssm(fraction=0.5, **kw) -> SparseFedAdam:
    return SparseFedAdam(CLIENT, TopK(fraction, PARTS, **kw), fairness=kw.get("select_by") == "fair")


# ------------------------------------------------------------------------------------------- fairness_mask

T = torch.tensor
#                 0     1     2    3    4    5    6    7
OVERLAP = [T([0.9, -0.8, 0.1, 0.0, 0.7, 0.0, 0.0, 0.2]),   # |.| order: 0 1 4 7 2 3 5 6
           T([0.5, 0.6, 0.0, 0.3, 0.0, 0.0, 0.1, 0.0]),    # 1 0 3 6 2 4 5 7
           T([-0.02, 0.01, 0.0, 0.0, 0.0, 0.03, 0.0, 0.0])]  # 5 0 1 2 3 4 6 7
DISJOINT = [T([9.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.5]),        # 0 1 6 ...
            T([0.0, 0.0, 7.0, -6.0, 0.0, 0.0, 0.4]),       # 2 3 6 ...
            T([0.0, 0.0, 0.0, 0.0, 5.0, 4.0, 0.3])]        # 4 5 6 ...


@pytest.mark.parametrize("vectors, k, expected", [
    # depth ceil(4/3) = 2: {0, 1} | {1, 0} | {5, 0} = {0, 1, 5}; one short: the update's next largest, 4
    (OVERLAP, 4, {0, 1, 4, 5}),
    # depth 2 again, two short: round-robin, the update's next (4), then the first moment's next (3)
    (OVERLAP, 5, {0, 1, 3, 4, 5}),
    # depth 2, three short: 4, 3, then the second moment's next not yet chosen (1 is, so 2)
    (OVERLAP, 6, {0, 1, 2, 3, 4, 5}),
    # depth 2: {0, 1} | {2, 3} | {4, 5} = 6 positions, one too many: the second moment's 2nd (5) goes
    (DISJOINT, 5, {0, 1, 2, 3, 4}),
    # depth 3: {0, 1, 6} | {2, 3, 6} | {4, 5, 6}: seven distinct, exactly k
    (DISJOINT, 7, {0, 1, 2, 3, 4, 5, 6}),
])
def test_fairness_mask_by_hand(vectors, k, expected):
    mask = fairness_mask(vectors, k)
    assert mask.dtype == torch.float32 and mask.shape == vectors[0].shape
    assert set(mask.unique().tolist()) <= {0.0, 1.0} and int(mask.sum()) == k
    assert support(mask) == expected


def test_fairness_mask_trims_round_robin():
    """k = 4, depth 2: the union {0, 1} | {2, 3} | {4, 5} has 6 positions. Trimmed in the order of the fill
    (round-robin: each vector's 1st, then each one's 2nd, ...) it keeps 0, 2, 4 and 1: every vector gets a share."""
    assert support(fairness_mask(DISJOINT, 4)) == {0, 1, 2, 4}


def test_fairness_mask_refuses_more_positions_than_there_are():
    with pytest.raises(ValueError, match="k must be in"):
        fairness_mask([torch.ones(3)], 4)


def test_fairness_mask_single_vector_is_top_k():
    x = T([0.3, -2.0, 0.1, 1.0, -0.5])
    assert support(fairness_mask([x], 2)) == {1, 3}
    assert support(fairness_mask([x, x, x], 3)) == {1, 3, 4}  # depth 1 gives {1}; fill: 3, then 4


# ------------------------------------------------------------------------------------------- one round by hand

def test_start_unpacks_the_broadcast_into_params_and_adam_state():
    strategy = ssm()
    state = initial_state(strategy)
    sent = strategy.broadcast(state)
    assert list(sent) == ["weight", "bias", "m:weight", "m:bias", "v:weight", "v:bias"]
    assert strategy.down == Dense("float32", PARTS) and strategy.down.nbytes(SHAPES) == 3 * 4 * 4
    received = transmit(strategy.down, sent, SHAPES)
    params, opt_state = strategy.start(None, received)
    assert flat(params).tolist() == pytest.approx(W0)
    assert list(params) == ["weight", "bias"]
    unpacked = LocalAdam.unpack(opt_state)
    assert flat(unpacked["m"]).tolist() == pytest.approx(M0) and flat(unpacked["v"]).tolist() == pytest.approx(V0)
    assert unpacked["step"].dtype == torch.float64 and unpacked["step"].item() == 0


def test_finish_gives_the_three_deltas_of_one_local_adam_step():
    strategy = ssm()
    for device in DATA:
        _, result = device_round(strategy, initial_state(strategy), device)
        dw, dm, dv = by_hand(device)
        assert set(result.update) == {"weight", "bias", "m:weight", "m:bias", "v:weight", "v:bias"}
        assert flat(result.update).tolist() == pytest.approx(dw, rel=1e-5, abs=1e-7)
        assert flat(result.update, "m").tolist() == pytest.approx(dm, rel=1e-5, abs=1e-7)
        assert flat(result.update, "v").tolist() == pytest.approx(dv, rel=1e-5, abs=1e-8)
    # a few entries written out: device B's first moment moves by 0.1 (g - M), its update by -lr m / sqrt(v + eps)
    dw, dm, dv = by_hand(1)
    assert dm == pytest.approx([-0.01, -0.45, 0.02, -0.155])
    assert dv == pytest.approx([-0.0001, 0.2021, -0.000025, 0.0216])
    assert dw[2] == pytest.approx(-0.1 * -0.18 / math.sqrt(0.99 * 0.0025 + 0.01))  # = 0.16116
    assert dw[1] == pytest.approx(-0.1 * -0.45 / math.sqrt(0.99 * 0.04 + 0.01 * 4.5 ** 2 + 0.01))


def test_ssm_round_by_hand():
    """FedAdam-SSM: the top half of |DW| and the same positions of DM, DV; W, M, V + (3 DX_A + 1 DX_B) / 4 on the
    kept entries, the old value where nobody kept one, and no renormalization by how many kept it."""
    strategy = ssm()
    codec = strategy.up
    assert codec.k(4) == 2 and not codec.uses_indices(4)  # 2 x ceil(log2 4) = 4 bits: a tie, so the 4-bit mask
    assert codec.nbytes(SHAPES) == 1 + 3 * 2 * 4
    new, decoded, _ = play_round(strategy, initial_state(strategy))
    hand = {d: by_hand(d) for d in DATA}
    kept = {0: {0, 2}, 1: {1, 2}}
    for d in DATA:
        for part, values in zip(PARTS, hand[d]):
            got = flat(decoded[d], part)
            assert support(got) == kept[d]
            expected = [values[i] if i in kept[d] else 0.0 for i in range(4)]
            assert got.tolist() == pytest.approx(expected, rel=1e-5, abs=1e-9)
    for part, (old, index) in zip(PARTS, ((W0, 0), (M0, 1), (V0, 2))):
        got = flat(new.params) if part == "" else flat(new.optimizer[part])
        a, b = hand[0][index], hand[1][index]
        expected = [old[0] + 3 * a[0] / 4,               # A only: 3/4 of A's, not A's
                    old[1] + 1 * b[1] / 4,               # B only
                    old[2] + (3 * a[2] + 1 * b[2]) / 4,  # both
                    old[3]]                              # nobody: the old value
        assert got.tolist() == pytest.approx(expected, rel=1e-5, abs=1e-8)
        assert got[0].item() != pytest.approx(old[0] + a[0], rel=1e-3)
    assert flat(new.params).tolist() == pytest.approx([0.5 - 0.75 * 0.07509, -0.5 + 0.25 * 0.08962,
                                                       1.0 + (3 * 0.18303 + 0.16116) / 4, 0.0], abs=1e-5)
    assert bool((flat(new.optimizer["v"]) >= 0).all())
    assert strategy.aggregate(new, 2, [], []) == (new, {})  # nobody arrived: nothing changes


def test_fedadam_top_keeps_each_parts_own_positions():
    strategy = ssm(shared_mask=False)
    assert strategy.up.nbytes(SHAPES) == math.ceil(3 * min(4, 2 * 2) / 8) + 3 * 2 * 4
    new, decoded, _ = play_round(strategy, initial_state(strategy))
    kept = {0: ({0, 2}, {1, 3}, {2, 3}), 1: ({1, 2}, {1, 3}, {1, 3})}  # |DW|, |DM|, |DV|
    for d in DATA:
        for part, values, positions in zip(PARTS, by_hand(d), kept[d]):
            got = flat(decoded[d], part)
            assert support(got) == positions
            assert got.tolist() == pytest.approx([values[i] if i in positions else 0.0 for i in range(4)],
                                                 rel=1e-5, abs=1e-9)
    # the first moment: entries 1 and 3 from both devices, 0 and 2 untouched
    (_, dm_a, _), (_, dm_b, _) = by_hand(0), by_hand(1)
    assert flat(new.optimizer["m"]).tolist() == pytest.approx(
        [M0[0], M0[1] + (3 * dm_a[1] + dm_b[1]) / 4, M0[2], M0[3] + (3 * dm_a[3] + dm_b[3]) / 4], rel=1e-5)


@pytest.mark.parametrize("select_by, kept", [("m", {0: {1, 3}, 1: {1, 3}}), ("v", {0: {2, 3}, 1: {1, 3}})])
def test_ssm_m_and_ssm_v_select_by_their_moment(select_by, kept):
    strategy = ssm(select_by=select_by)
    assert strategy.up.nbytes(SHAPES) == ssm().up.nbytes(SHAPES)
    _, decoded, _ = play_round(strategy, initial_state(strategy))
    for d in DATA:
        for part, values in zip(PARTS, by_hand(d)):
            got = flat(decoded[d], part)
            assert support(got) == kept[d]
            assert got.tolist() == pytest.approx([values[i] if i in kept[d] else 0.0 for i in range(4)],
                                                 rel=1e-5, abs=1e-9)


def test_fairness_top_round():
    """k = 2, depth 1: A's tops are 2 (|DW|), 3 (|DM|), 2 (|DV|) -> {2, 3}; B's 2, 1, 1 -> {1, 2}."""
    strategy = ssm(select_by="fair")
    assert strategy.fairness and strategy.up.nbytes(SHAPES) == ssm().up.nbytes(SHAPES) == 25
    _, decoded, results = play_round(strategy, initial_state(strategy))
    kept = {0: {2, 3}, 1: {1, 2}}
    for d in DATA:
        sent = results[d].update
        assert {"fair:weight", "fair:bias"} <= set(sent) and support(flat(sent, "fair")) == kept[d]
        assert len(strategy.up.encode(sent)) == 25
        assert not any(key.startswith("fair:") for key in decoded[d])
        assert set(decoded[d]) == {"weight", "bias", "m:weight", "m:bias", "v:weight", "v:bias"}
        for part, values in zip(PARTS, by_hand(d)):
            assert flat(decoded[d], part).tolist() == pytest.approx(
                [values[i] if i in kept[d] else 0.0 for i in range(4)], rel=1e-5, abs=1e-9)


def test_alpha_one_is_fedadam_with_moment_averaging():
    """TopK(1.0) keeps every entry: two rounds of FedAdam-SSM give exactly FedAdam's (Dense x3) states."""
    sparse, dense = ssm(1.0), SparseFedAdam(CLIENT, Dense("float32", PARTS))
    assert sparse.up.k(4) == 4 and dense.up.nbytes(SHAPES) == 48 and sparse.up.nbytes(SHAPES) == 1 + 48
    a = b = initial_state(dense)
    for _ in range(2):
        a, up_a, _ = play_round(sparse, a)
        b, up_b, _ = play_round(dense, b)
        for d in DATA:
            assert up_a[d].keys() == up_b[d].keys()
            assert all(torch.equal(up_a[d][key], up_b[d][key]) for key in up_a[d])
        for x, y in ((a.params, b.params), (a.optimizer["m"], b.optimizer["m"]), (a.optimizer["v"], b.optimizer["v"])):
            assert x.keys() == y.keys() and all(torch.equal(x[n], y[n]) for n in x)
    assert flat(a.params).tolist() != pytest.approx(W0)  # it moved


# ------------------------------------------------------------------------------------------- end to end

D = FEATURES * CLASSES + CLASSES  # logreg: 21 entries
LEARNED = ["train_loss", "accuracy", "loss"]


class Recording:
    def __init__(self, strategy):
        self.inner, self.states = strategy, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

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


def topk_bytes(alpha, masks):
    """By hand: k = floor(alpha d); positions min(d, k ceil(log2 d)) bits per mask, padded to a byte; 3k floats."""
    k = math.floor(alpha * D)
    return math.ceil(masks * min(D, k * math.ceil(math.log2(D))) / 8) + 3 * k * 4


@pytest.mark.parametrize("algorithm, up_bytes", [
    ({"name": "fedadam_ssm", "alpha": 0.1}, topk_bytes(0.1, 1)),     # k = 2: 2 x 5-bit indices, 1 + 24 bytes
    ({"name": "fedadam_top", "alpha": 0.25}, topk_bytes(0.25, 3)),   # k = 5: 25 > 21, three 21-bit masks
    ({"name": "fairness_top", "alpha": 0.25}, topk_bytes(0.25, 1)),
    ({"name": "fedadam_ssm_v", "alpha": 0.1}, topk_bytes(0.1, 1)),
    ({"name": "fedadam_moments"}, 3 * 4 * D),
])
def test_end_to_end_bytes_and_executors_agree(run, algorithm, up_bytes):
    assert (topk_bytes(0.1, 1), topk_bytes(0.25, 3), topk_bytes(0.25, 1)) == (2 + 24, 8 + 60, 3 + 60)
    rounds, recording, events = run(algorithm)
    strategy = recording.inner
    assert isinstance(strategy, SparseFedAdam) and strategy.fairness == (algorithm["name"] == "fairness_top")
    assert strategy.client == LocalAdam(lr=0.01, batch_size=10, local_steps=3, beta1=0.9, beta2=0.999, eps=1e-6,
                                        bias_correction=False, eps_inside_sqrt=True)
    assert len(rounds) == 2 and (rounds.arrived == 2).all()
    assert (rounds.bytes_up == 2 * up_bytes).all()
    assert (rounds.bytes_down == 2 * 3 * 4 * D).all()
    # per device: TWO_DEVICES' links (0.25 s, 87,360 / 43,680 B/s and 0.5 s, 174,720 B/s both ways)
    seconds = (events.end_s - events.start_s).groupby([events.device, events.phase]).apply(list)
    for device, latency, down_Bps, up_Bps in ((0, 0.25, 87_360, 43_680), (1, 0.5, 174_720, 174_720)):
        assert seconds[device, "upload"] == pytest.approx([latency + up_bytes / up_Bps] * 2, abs=1e-9)
        assert seconds[device, "download"] == pytest.approx([latency + 3 * 4 * D / down_Bps] * 2, abs=1e-9)
    for state in recording.states:
        assert all(bool((v >= 0).all()) for v in state.optimizer["v"].values())
    assert any(bool((v > 0).any()) for v in recording.states[-1].optimizer["v"].values())
    batched, batched_recording, batched_events = run(algorithm, executor="batched")
    pd.testing.assert_frame_equal(events, batched_events, check_exact=True)
    pd.testing.assert_frame_equal(rounds.drop(columns=LEARNED), batched.drop(columns=LEARNED), check_exact=True)
    for column in LEARNED:  # vmapped and plain autograd round differently in the last float bits
        np.testing.assert_allclose(rounds[column], batched[column], rtol=1e-5, atol=1e-6)
    for x, y in zip(recording.states, batched_recording.states):
        for name in x.params:
            torch.testing.assert_close(x.params[name], y.params[name], rtol=1e-5, atol=1e-7)
            for part in ("m", "v"):
                torch.testing.assert_close(x.optimizer[part][name], y.optimizer[part][name], rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("config, codec", [
    (FedAdamMomentsConfig, Dense("float32", PARTS)),
    (FedAdamSSMConfig, TopK(0.05, PARTS)),
    (FedAdamTopConfig, TopK(0.05, PARTS, shared_mask=False)),
    (FedAdamSSMMConfig, TopK(0.05, PARTS, select_by="m")),
    (FedAdamSSMVConfig, TopK(0.05, PARTS, select_by="v")),
    (FairnessTopConfig, TopK(0.05, PARTS, select_by="fair")),
])
def test_configs_pick_their_codec(config, codec):
    name = config.model_fields["name"].annotation.__args__[0]
    build = SimpleNamespace(up=Dense("float32"), down=Dense("float32"),
                            client=LocalSGD(lr=0.001, local_epochs=1, batch_size=64, local_steps=30))
    strategy = strategy_of(config(name=name), build)
    assert strategy.up == codec and strategy.fairness == (name == "fairness_top")
    assert strategy.client == LocalAdam(lr=0.001, batch_size=64, local_steps=30, beta1=0.9, beta2=0.999, eps=1e-6,
                                        bias_correction=False, eps_inside_sqrt=True)
