"""Local Adam and Lion: against torch.optim where they coincide, by hand for the papers' variants, and the same
training one client at a time and stacked, with the optimizer state handed back and resumed."""
import math

import numpy as np
import pytest
import torch

from testbed import rules
from testbed.execution import make_loss_fn
from testbed.local import LocalAdam, LocalLion, train_one, train_stacked

P0 = {"a": torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64),
      "b": torch.tensor([[0.3, 0.0], [-0.7, 2.0]], dtype=torch.float64)}
GRADS = [{"a": torch.tensor([0.3, -0.1, 2.0]), "b": torch.tensor([[0.5, 1e-3], [-0.2, 0.0]])},
         {"a": torch.tensor([-0.5, 0.4, 1.0]), "b": torch.tensor([[0.1, -2.0], [0.3, 0.4]])},
         {"a": torch.tensor([0.2, 0.2, -0.7]), "b": torch.tensor([[-0.6, 0.5], [0.0, -1.0]])},
         {"a": torch.tensor([0.0, -0.9, 0.1]), "b": torch.tensor([[0.2, 0.2], [0.8, 0.1]])}]
GRADS = [{n: g.double() for n, g in grads.items()} for grads in GRADS]


@pytest.mark.parametrize("torch_cls, kw", [
    (torch.optim.Adam, {}),
    (torch.optim.Adam, {"weight_decay": 0.1}),
    (torch.optim.AdamW, {"weight_decay": 0.1}),
    (torch.optim.Adam, {"amsgrad": True, "weight_decay": 0.1}),
    (torch.optim.AdamW, {"amsgrad": True, "weight_decay": 0.1}),
])
def test_local_adam_is_torch_adam_step_by_step(torch_cls, kw):
    lr, betas, eps = 0.05, (0.8, 0.9), 1e-6
    cfg = LocalAdam(lr=lr, beta1=betas[0], beta2=betas[1], eps=eps, weight_decay=kw.get("weight_decay", 0.0),
                    decoupled=torch_cls is torch.optim.AdamW, amsgrad=kw.get("amsgrad", False))
    reference = {n: torch.nn.Parameter(p.clone()) for n, p in P0.items()}
    opt = torch_cls(reference.values(), lr=lr, betas=betas, eps=eps, foreach=False, **kw)
    params, state = dict(P0), cfg.init(P0)
    for grads in GRADS:
        for n, p in reference.items():
            p.grad = grads[n].clone()
        opt.step()
        params, state = cfg.step(params, grads, state)
        for n, p in reference.items():
            torch.testing.assert_close(params[n], p.detach(), rtol=1e-12, atol=1e-14)
            torch.testing.assert_close(state[f"m:{n}"], opt.state[p]["exp_avg"], rtol=1e-12, atol=1e-14)
            torch.testing.assert_close(state[f"v:{n}"], opt.state[p]["exp_avg_sq"], rtol=1e-12, atol=1e-14)
            if cfg.amsgrad:
                torch.testing.assert_close(state[f"vmax:{n}"], opt.state[p]["max_exp_avg_sq"], rtol=1e-12, atol=1e-14)
    assert state["step"].item() == len(GRADS)
    assert LocalAdam.unpack(state)["m"].keys() == P0.keys()


def test_fedadam_ssm_local_adam_by_hand():
    """Deng et al. eqs. 3-5: no bias correction, w -= eta * m / sqrt(v + eps); moments start from given M, V."""
    lr, b1, b2, eps = 0.1, 0.9, 0.99, 1e-2
    cfg = LocalAdam(lr=lr, beta1=b1, beta2=b2, eps=eps, bias_correction=False, eps_inside_sqrt=True)
    w, m, v = 1.0, 0.2, 0.05
    params = {"w": torch.tensor([w], dtype=torch.float64)}
    state = cfg.pack({"w": torch.tensor([m], dtype=torch.float64)}, {"w": torch.tensor([v], dtype=torch.float64)})
    for g in (0.5, -1.5):
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        w = w - lr * m / math.sqrt(v + eps)
        params, state = cfg.step(params, {"w": torch.tensor([g], dtype=torch.float64)}, state)
        assert params["w"].item() == pytest.approx(w, rel=1e-12)
        assert state["m:w"].item() == pytest.approx(m, rel=1e-12)
        assert state["v:w"].item() == pytest.approx(v, rel=1e-12)
        if g == 0.5:  # m = 0.23, v = 0.052, w = 1 - 0.1 * 0.23 / sqrt(0.052 + 0.01); torch's form would differ
            assert params["w"].item() == pytest.approx(0.90762977, abs=1e-8)
            assert abs(params["w"].item() - (1 - 0.1 * 0.23 / (math.sqrt(0.052) + 0.01))) > 1e-3


def test_fadamgt_local_adam_by_hand():
    """Chen et al. 2025 Alg. 1: m from 0, v and vhat from the carried v, vhat = max(vhat, v), no bias correction,
    x -= eta * m / (sqrt(vhat) + eps), L2 weight decay on the gradient."""
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.99, 1e-8, 0.1
    cfg = LocalAdam(lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd, bias_correction=False, amsgrad=True)
    x = [1.0, -1.0]
    v_carried = [4.0, 0.0]  # entry 0: vhat stays at the carried 4.0 (v decays); entry 1: vhat follows v
    t = lambda values: torch.tensor(values, dtype=torch.float64)  # noqa: E731
    params = {"x": t(x)}
    state = cfg.pack({"x": t([0.0, 0.0])}, {"x": t(v_carried)}, vmax={"x": t(v_carried)})
    m, v, vhat = [0.0, 0.0], list(v_carried), list(v_carried)
    for g in ([1.0, 2.0], [-1.0, 0.5]):
        for j in range(2):
            gj = g[j] + wd * x[j]
            m[j] = b1 * m[j] + (1 - b1) * gj
            v[j] = b2 * v[j] + (1 - b2) * gj * gj
            vhat[j] = max(vhat[j], v[j])
            x[j] = x[j] - lr * m[j] / (math.sqrt(vhat[j]) + eps)
        params, state = cfg.step(params, {"x": t(g)}, state)
        torch.testing.assert_close(params["x"], t(x), rtol=1e-12, atol=0.0)
        torch.testing.assert_close(state["vmax:x"], t(vhat), rtol=1e-12, atol=0.0)
        if g[0] == 1.0:  # entry 0: g = 1 + 0.1 * 1, m = 0.11, v = 3.9721 < vhat = 4 -> x = 1 - 0.01 * 0.11 / 2
            assert params["x"][0].item() == pytest.approx(0.99945, rel=1e-9)
    assert vhat[0] == 4.0 and vhat[1] == v[1] < 4.0


def test_lion_by_hand():
    """c = b1 m + (1-b1) g; x -= lr (sign(c) + wd x); m = b2 m + (1-b2) g; sign(0) = 0. (Binary-exact numbers.)"""
    lr, b1, b2, wd = 0.125, 0.75, 0.875, 0.5
    cfg = LocalLion(lr=lr, beta1=b1, beta2=b2, weight_decay=wd)
    t = lambda values: torch.tensor(values, dtype=torch.float64)  # noqa: E731
    params, state = {"x": t([1.0, -2.0, 0.0])}, cfg.pack({"x": t([0.0, 1.0, 0.0])})
    # step 1, g = [0.2, -3, 0]: c = [0.05, 0.75 - 0.75 = 0, 0] -> sign [1, 0, 0]
    #   x = [1 - 0.125 (1 + 0.5), -2 - 0.125 (0 - 1), 0] = [0.8125, -1.875, 0];  m = [0.025, 0.875 - 0.375, 0]
    params, state = cfg.step(params, {"x": t([0.2, -3.0, 0.0])}, state)
    torch.testing.assert_close(params["x"], t([0.8125, -1.875, 0.0]), rtol=1e-15, atol=0.0)
    torch.testing.assert_close(state["m:x"], t([0.025, 0.5, 0.0]), rtol=1e-15, atol=0.0)
    # step 2, g = [-1, 1, 3]: c = [0.01875 - 0.25, 0.375 + 0.25, 0.75] -> sign [-1, 1, 1]
    #   x = [0.8125 - 0.125 (-1 + 0.40625), -1.875 - 0.125 (1 - 0.9375), 0 - 0.125] = [0.88671875, -1.8828125, -0.125]
    #   m = [0.875 * 0.025 - 0.125, 0.875 * 0.5 + 0.125, 0.375] = [-0.103125, 0.5625, 0.375]
    params, state = cfg.step(params, {"x": t([-1.0, 1.0, 3.0])}, state)
    torch.testing.assert_close(params["x"], t([0.88671875, -1.8828125, -0.125]), rtol=1e-15, atol=0.0)
    torch.testing.assert_close(state["m:x"], t([-0.103125, 0.5625, 0.375]), rtol=1e-12, atol=0.0)
    assert LocalLion.unpack(state)["m"]["x"] is state["m:x"]


def test_lion_matches_torch_optim_if_it_has_one():
    if not hasattr(torch.optim, "Lion"):
        pytest.skip(f"torch {torch.__version__} has no torch.optim.Lion")
    cfg = LocalLion(lr=0.05, beta1=0.9, beta2=0.99, weight_decay=0.1)
    reference = {n: torch.nn.Parameter(p.clone()) for n, p in P0.items()}
    opt = torch.optim.Lion(reference.values(), lr=0.05, betas=(0.9, 0.99), weight_decay=0.1)
    params, state = dict(P0), cfg.init(P0)
    for grads in GRADS:
        for n, p in reference.items():
            p.grad = grads[n].clone()
        opt.step()
        params, state = cfg.step(params, grads, state)
    for n, p in reference.items():
        torch.testing.assert_close(params[n], p.detach())


def test_rules_broadcast_a_per_client_step_over_stacked_tensors_and_vmap():
    """Stacked clients at different step counts: one call equals each client on its own, and vmap over clients."""
    p, g = torch.randn(3, 4, 2, dtype=torch.float64), torch.randn(3, 4, 2, dtype=torch.float64)
    m, v = torch.randn(3, 4, 2, dtype=torch.float64), torch.rand(3, 4, 2, dtype=torch.float64)
    step = torch.tensor([1.0, 2.0, 7.0], dtype=torch.float64)
    for inside in (False, True):
        stacked = rules.adam(p, g, m, v, v, step, 0.1, 0.9, 0.99, 1e-3, amsgrad=True, eps_inside_sqrt=inside)
        for i in range(3):
            alone = rules.adam(p[i], g[i], m[i], v[i], v[i], step[i], 0.1, 0.9, 0.99, 1e-3, amsgrad=True,
                               eps_inside_sqrt=inside)
            for a, b in zip(stacked, alone):
                torch.testing.assert_close(a[i], b, rtol=1e-14, atol=0.0)
        vmapped = torch.func.vmap(lambda *a: rules.adam(*a, 0.1, 0.9, 0.99, 1e-3, amsgrad=True,
                                                        eps_inside_sqrt=inside))(p, g, m, v, v, step)
        for a, b in zip(stacked, vmapped):
            torch.testing.assert_close(a, b, rtol=1e-14, atol=0.0)
    lion = torch.func.vmap(lambda *a: rules.lion(*a, 0.1, 0.9, 0.99, 0.01))(p, g, m)
    for a, b in zip(lion, rules.lion(p, g, m, 0.1, 0.9, 0.99, 0.01)):
        torch.testing.assert_close(a, b, rtol=1e-14, atol=0.0)


CLIENT_SIZES = [11, 6, 3]  # unequal, with partial last batches: clients take different numbers of steps


@pytest.mark.parametrize("cfg", [
    LocalAdam(lr=0.01, local_epochs=2, batch_size=4, weight_decay=1e-2, amsgrad=True),
    LocalAdam(lr=0.01, local_epochs=1, batch_size=4, beta2=0.99, bias_correction=False, eps_inside_sqrt=True),
    LocalAdam(lr=0.01, local_epochs=1, batch_size=4, weight_decay=1e-2, decoupled=True),
    LocalLion(lr=0.01, local_epochs=1, batch_size=4, weight_decay=1e-2),
], ids=["adam-amsgrad", "fedadam-ssm", "adamw", "lion"])
def test_stacked_training_equals_one_client_at_a_time_over_two_rounds(cfg):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    loss_fn = make_loss_fn(model)

    def objective(params, anchor, x, y, extras):
        loss, accuracy = loss_fn(params, x, y)
        return loss, {"accuracy": accuracy}

    xs = [torch.randn(n, 6) for n in CLIENT_SIZES]
    ys = [torch.randint(0, 3, (n,)) for n in CLIENT_SIZES]
    rngs = lambda r: [np.random.default_rng([r, i]) for i in range(len(xs))]  # noqa: E731
    serial = [train_one(objective, params, x, y, cfg, rng) for x, y, rng in zip(xs, ys, rngs(0))]
    stacked = train_stacked(objective, [params] * len(xs), xs, ys, cfg, rngs(0))
    # round 2: each client resumes from its own model and optimizer state
    serial = [train_one(objective, p, x, y, cfg, rng, state=s) for (p, _, s), x, y, rng in zip(serial, xs, ys, rngs(1))]
    stacked = train_stacked(objective, [p for p, _, _ in stacked], xs, ys, cfg, rngs(1),
                            states=[s for _, _, s in stacked])
    for size, (p_serial, stats_serial, s_serial), (p_stacked, stats_stacked, s_stacked) in zip(CLIENT_SIZES, serial,
                                                                                                stacked):
        assert stats_stacked["train_loss"] == pytest.approx(stats_serial["train_loss"], rel=1e-5)
        assert s_serial.keys() == s_stacked.keys() == cfg.init(params).keys()
        for name in params:
            assert not torch.equal(p_serial[name], params[name])
            torch.testing.assert_close(p_stacked[name], p_serial[name], rtol=1e-4, atol=1e-5)
        for key in s_serial:
            torch.testing.assert_close(s_stacked[key], s_serial[key], rtol=1e-4, atol=1e-6)
        if isinstance(cfg, LocalAdam):  # both rounds' steps, counted per client
            assert s_serial["step"].item() == s_stacked["step"].item() == 2 * cfg.local_epochs * math.ceil(size / 4)


def test_adam_state_carried_over_equals_one_longer_run():
    """Two calls with the state handed back take the same steps as one call over both calls' batches."""
    cfg = LocalAdam(lr=0.1, local_epochs=1, batch_size=2, beta2=0.9)
    w0 = {"w": torch.tensor([1.0, -3.0])}

    def objective(p, anchor, x, y, extras):  # gradient w
        return 0.5 * p["w"].square().sum(), {"accuracy": torch.tensor(0.0)}

    x, y = torch.zeros(2, 1), torch.zeros(2)
    w1, _, state = train_one(objective, w0, x, y, cfg, np.random.default_rng(0))
    w2, _, state2 = train_one(objective, w1, x, y, cfg, np.random.default_rng(1), state=state)
    (w1s, _, state_s), = train_stacked(objective, [w0], [x], [y], cfg, [np.random.default_rng(0)])
    (w2s, _, _), = train_stacked(objective, [w1s], [x], [y], cfg, [np.random.default_rng(1)], states=[state_s])
    expected = {"w": w0["w"].clone()}
    reference = cfg.init(w0)
    for _ in range(2):
        expected, reference = cfg.step(expected, {"w": expected["w"]}, reference)
    torch.testing.assert_close(w2["w"], expected["w"])
    torch.testing.assert_close(w2s["w"], expected["w"])
    assert state2["step"].item() == 2
    # bias-corrected Adam's first step is lr * sign(g): w1 = w0 - 0.1 * sign(w0)
    torch.testing.assert_close(w1["w"], torch.tensor([0.9, -2.9]))


def test_dual_averaging_steps_on_the_gradient_and_sums_the_momentum():
    """FedDA's client, two steps by hand with gradients 1 then 2 (beta 0.5, lr 0.1, m from 0.4):
    m1 = 0.5*0.4 + 0.5*1 = 0.7, P1 = 0.7, x1 = 1 - 0.1; m2 = 0.35 + 1 = 1.35, P2 = 2.05, x2 = 0.9 - 0.2."""
    from testbed.local import LocalDualAveraging

    cfg = LocalDualAveraging(lr=0.1, beta=0.5)
    x, state = {"w": torch.tensor([1.0])}, {"m:w": torch.tensor([0.4]), "P:w": torch.tensor([0.0])}
    for g in (1.0, 2.0):
        x, state = cfg.step(x, {"w": torch.tensor([g])}, state)
    torch.testing.assert_close(x["w"], torch.tensor([0.7]))
    torch.testing.assert_close(state["m:w"], torch.tensor([1.35]))
    torch.testing.assert_close(state["P:w"], torch.tensor([2.05]))
