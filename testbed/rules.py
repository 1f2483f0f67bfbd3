"""Pure update rules on tensors, shared by every executor and every algorithm.

Each rule takes a parameter tensor, its gradient (or server pseudo-gradient) and its state, and returns new
tensors; nothing is updated in place, so the same rule runs per client, under vmap, or on a Ray worker.

Client rule: SGD as torch.optim.SGD defines it (dampening 0, no Nesterov), checked against it in the tests.
Server rules (Reddi et al., "Adaptive Federated Optimization", ICLR 2021, Algorithm 2): with the averaged
client delta D = mean_i(x_i - x):
    m = b1*m + (1-b1)*D
    FedAdagrad: v = v + D^2
    FedYogi:    v = v - (1-b2) * D^2 * sign(v - D^2)
    FedAdam:    v = b2*v + (1-b2)*D^2
    x = x + lr * m / (sqrt(v) + tau)
No bias correction, as in the paper; the paper starts v at tau^2 (its v_{-1} >= tau^2), and so do we.
FedAvgM (Hsu et al. 2019) is server SGD with momentum on the pseudo-gradient -D: m = beta*m + D; x = x + lr*m.
"""
from __future__ import annotations

import torch
from torch import Tensor


def sgd(param: Tensor, grad: Tensor, buf: Tensor | None, lr: float, momentum: float = 0.0,
        weight_decay: float = 0.0) -> tuple[Tensor, Tensor | None]:
    """One step of torch.optim.SGD; `buf` is the momentum buffer, zeros before the first step (torch's first
    step sets it to the gradient, which momentum * 0 + gradient also gives); unused without momentum."""
    if weight_decay:
        grad = grad + weight_decay * param
    if momentum:
        buf = momentum * buf + grad
        grad = buf
    return param - lr * grad, buf


def server_momentum(x: Tensor, delta: Tensor, m: Tensor, lr: float, momentum: float) -> tuple[Tensor, Tensor]:
    """FedAvgM; with momentum 0 and lr 1 this is FedAvg's x + delta."""
    m = momentum * m + delta
    return x + lr * m, m


def _adaptive_step(x: Tensor, m: Tensor, v: Tensor, lr: float, tau: float) -> Tensor:
    return x + lr * m / (v.sqrt() + tau)


def server_adam(x: Tensor, delta: Tensor, m: Tensor, v: Tensor, lr: float, beta1: float, beta2: float,
                tau: float) -> tuple[Tensor, Tensor, Tensor]:
    m = beta1 * m + (1 - beta1) * delta
    v = beta2 * v + (1 - beta2) * delta.square()
    return _adaptive_step(x, m, v, lr, tau), m, v


def server_yogi(x: Tensor, delta: Tensor, m: Tensor, v: Tensor, lr: float, beta1: float, beta2: float,
                tau: float) -> tuple[Tensor, Tensor, Tensor]:
    m = beta1 * m + (1 - beta1) * delta
    d2 = delta.square()
    v = v - (1 - beta2) * d2 * torch.sign(v - d2)
    return _adaptive_step(x, m, v, lr, tau), m, v


def server_adagrad(x: Tensor, delta: Tensor, m: Tensor, v: Tensor, lr: float, beta1: float,
                   tau: float) -> tuple[Tensor, Tensor, Tensor]:
    m = beta1 * m + (1 - beta1) * delta
    v = v + delta.square()
    return _adaptive_step(x, m, v, lr, tau), m, v
