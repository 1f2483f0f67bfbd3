"""Gradient clipping (client.clip_norm): one step by hand, torch.nn.utils.clip_grad_norm_ as the reference, the same
clients trained one at a time and stacked, and off by default."""
import numpy as np
import pytest
import torch

from testbed import rules
from testbed.execution import make_loss_fn
from testbed.local import LocalSGD, train_one, train_stacked


def test_clipping_by_hand():
    # norm sqrt(3^2 + 4^2 + 12^2) = 13: scaled by 6.5 / (13 + 1e-6) to norm 6.5; a norm below the limit is kept
    grads = {"a": torch.tensor([3.0, 4.0], dtype=torch.float64), "b": torch.tensor([[12.0]], dtype=torch.float64)}
    clipped = rules.clip_by_norm(grads, 6.5)
    torch.testing.assert_close(clipped["a"], torch.tensor([3.0, 4.0], dtype=torch.float64) * 6.5 / (13 + 1e-6))
    assert float(torch.sqrt(sum(g.square().sum() for g in clipped.values()))) == pytest.approx(6.5, rel=1e-6)
    assert all(torch.equal(rules.clip_by_norm(grads, 20.0)[n], g) for n, g in grads.items())


def test_clipping_is_torchs_clip_grad_norm():
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(3))]
    for p in params:
        p.grad = torch.randn_like(p) * 5
    ours = rules.clip_by_norm({str(i): p.grad.clone() for i, p in enumerate(params)}, 2.0)
    torch.nn.utils.clip_grad_norm_(params, 2.0)
    for i, p in enumerate(params):
        torch.testing.assert_close(ours[str(i)], p.grad, rtol=1e-6, atol=0.0)


def test_stacked_clients_are_each_clipped_by_their_own_norm():
    grads = {"a": torch.tensor([[3.0, 4.0], [0.3, 0.4]])}   # norms 5 and 0.5
    clipped = rules.clip_by_norm(grads, 1.0, clients=True)
    torch.testing.assert_close(clipped["a"][0], torch.tensor([3.0, 4.0]) / (5 + 1e-6))
    assert torch.equal(clipped["a"][1], grads["a"][1])


def _objective():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    loss_fn = make_loss_fn(model)

    def objective(params, anchor, x, y, extras):
        loss, accuracy = loss_fn(params, x, y)
        return loss, {"accuracy": accuracy}
    return objective, {n: p.detach().clone() for n, p in model.named_parameters()}


def test_clipped_training_one_client_at_a_time_equals_stacked_and_differs_from_unclipped():
    objective, params = _objective()
    xs = [torch.randn(n, 6) * 10 for n in (11, 6)]
    ys = [torch.randint(0, 3, (n,)) for n in (11, 6)]
    cfg = LocalSGD(lr=0.5, batch_size=4, clip_norm=0.1)
    rngs = lambda: [np.random.default_rng(i) for i in range(2)]  # noqa: E731
    serial = [train_one(objective, params, x, y, cfg, rng) for x, y, rng in zip(xs, ys, rngs())]
    stacked = train_stacked(objective, [params, params], xs, ys, cfg, rngs())
    free = train_one(objective, params, xs[0], ys[0], LocalSGD(lr=0.5, batch_size=4), rngs()[0])
    for (p_serial, _, _), (p_stacked, _, _) in zip(serial, stacked):
        for name in params:
            torch.testing.assert_close(p_stacked[name], p_serial[name], rtol=1e-4, atol=1e-6)
    # three steps of at most 0.5 x 0.1 each: the model moved at most 0.15 in L2, unclipped it moved further
    moved = lambda p: float(torch.sqrt(sum((p[n] - params[n]).square().sum() for n in params)))  # noqa: E731
    assert moved(serial[0][0]) <= 0.15 + 1e-6 < moved(free[0])


def test_clipping_is_off_by_default():
    assert LocalSGD(lr=0.1).clip_norm is None
