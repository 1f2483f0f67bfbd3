"""Update rules against torch.optim where they coincide, and one server step by hand where they do not."""
import math

import torch

from testbed import rules
from testbed.algorithms import FedAvg, ServerAdam, ServerSGD
from testbed.algorithms.base import Arrival
from testbed.local import LocalSGD, train_one


def _torch_steps(optimizer_cls, grads, **kw):
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5]))
    opt = optimizer_cls([p], **kw)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    return p.detach()


GRADS = [torch.tensor([0.3, -0.1, 2.0]), torch.tensor([-0.5, 0.4, 1.0]), torch.tensor([0.2, 0.2, -0.7])]


def test_sgd_matches_torch_optim_with_momentum_and_weight_decay():
    p, buf = torch.tensor([1.0, -2.0, 0.5]), torch.zeros(3)
    for g in GRADS:
        p, buf = rules.sgd(p, g, buf, lr=0.1, momentum=0.9, weight_decay=0.01)
    torch.testing.assert_close(p, _torch_steps(torch.optim.SGD, GRADS, lr=0.1, momentum=0.9, weight_decay=0.01))


def test_fedavgm_is_torch_sgd_momentum_on_the_negated_delta():
    x, m = torch.tensor([1.0, -2.0, 0.5]), torch.zeros(3)
    for g in GRADS:  # server pseudo-gradient is -delta
        x, m = rules.server_momentum(x, -g, m, lr=0.7, momentum=0.9)
    torch.testing.assert_close(x, _torch_steps(torch.optim.SGD, GRADS, lr=0.7, momentum=0.9))


def test_fedadagrad_with_beta1_zero_is_torch_adagrad():
    tau = 1e-3
    x, m, v = torch.tensor([1.0, -2.0, 0.5]), torch.zeros(3), torch.full((3,), tau**2)
    for g in GRADS:
        x, m, v = rules.server_adagrad(x, -g, m, v, lr=0.1, beta1=0.0, tau=tau)
    expected = _torch_steps(torch.optim.Adagrad, GRADS, lr=0.1, eps=tau, initial_accumulator_value=tau**2)
    torch.testing.assert_close(x, expected)


def test_one_fedadam_server_step_by_hand():
    """Two clients (30 and 10 samples) send deltas; FedAdam (Reddi et al.) from v = tau^2, m = 0."""
    lr, b1, b2, tau = 0.1, 0.9, 0.99, 1e-3
    strategy = FedAvg(LocalSGD(lr=0.1), ServerAdam(lr, b1, b2, tau))
    state = strategy.init({"w": torch.tensor([1.0, 2.0])})
    arrivals = [Arrival(0, 30, {"w": torch.tensor([0.4, -0.2])}, {"train_loss": 1.0}),
                Arrival(1, 10, {"w": torch.tensor([-0.4, 0.6])}, {"train_loss": 2.0})]
    new, metrics = strategy.aggregate(state, 1, arrivals, [])
    # delta = (30*[0.4,-0.2] + 10*[-0.4,0.6]) / 40 = [0.2, 0.0]
    # m = 0.1*delta = [0.02, 0];  v = 0.99*1e-6 + 0.01*delta^2 = [0.00040099, 0.00000099]
    expected = [1.0 + lr * 0.02 / (math.sqrt(0.00040099) + tau), 2.0 + 0.0]
    torch.testing.assert_close(new.params["w"], torch.tensor(expected))
    torch.testing.assert_close(new.optimizer["v"]["w"], torch.tensor([0.00040099, 0.00000099]))
    assert metrics["train_loss"] == 1.25  # sample-weighted


def test_fedavg_server_is_the_sample_weighted_mean_of_client_models():
    strategy = FedAvg(LocalSGD(lr=0.1), ServerSGD())
    state = strategy.init({"w": torch.tensor([1.0])})
    arrivals = [Arrival(0, 3, {"w": torch.tensor([1.0])}, {"train_loss": 0.0}),
                Arrival(1, 1, {"w": torch.tensor([-1.0])}, {"train_loss": 0.0})]
    new, _ = strategy.aggregate(state, 1, arrivals, [])
    assert new.params["w"].item() == 1.5  # models 2.0 and 0.0, weighted 3:1


def test_fedprox_local_steps_by_hand():
    """loss = 0.5 ||w||^2 has gradient w; with one full batch per epoch, two epochs of FedProx give
    w1 = w0 - lr w0 and w2 = w1 - lr (w1 + mu (w1 - w0))."""
    import numpy as np

    lr, mu = 0.1, 0.5
    w0 = torch.tensor([1.0, -2.0])
    strategy = FedAvg(LocalSGD(lr=lr, local_epochs=2, batch_size=4), proximal_mu=mu)
    loss_fn = lambda p, x, y: (0.5 * p["w"].square().sum(), torch.tensor(0.0))  # noqa: E731 (data-free loss)
    trained, _, _ = train_one(strategy.objective(loss_fn), {"w": w0}, torch.zeros(4, 1), torch.zeros(4),
                              strategy.client, np.random.default_rng(0))
    update = strategy.finish(None, trained, {"w": w0}, {"train_loss": 0.0}, {}).update
    w1 = w0 - lr * w0
    w2 = w1 - lr * (w1 + mu * (w1 - w0))
    torch.testing.assert_close(update["w"], w2 - w0)
