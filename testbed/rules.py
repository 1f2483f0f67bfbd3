"""Pure update rules on tensors, shared by every executor and every algorithm.

Each rule takes a parameter tensor, its gradient (or server pseudo-gradient) and its state, and returns new
tensors; nothing is updated in place, so the same rule runs per client, under vmap, or on a Ray worker.

Client rule: SGD as torch.optim.SGD defines it (dampening 0, no Nesterov), checked against it in the tests.
Client rules Adam (torch.optim.Adam / AdamW, and with flags the papers' variants: no bias correction, eps inside
the square root, the AMSGrad max) and Lion (Chen et al. 2023); a step count, where a rule needs one, is a tensor (0-d
per client, [clients] when clients are stacked), so the rules run on stacked clients and under vmap alike.
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


def per_client(scalar: Tensor, like: Tensor) -> Tensor:
    """A per-client scalar (a step count, a factor made from it, a beta) shaped to broadcast against `like`: 0-d
    for one client, or with a leading client dimension when the clients' tensors are stacked (train_stacked) —
    then it is [clients] and `like` is [clients, ...]. Only shapes are read, so this is the same under vmap
    (where both are per-client)."""
    return scalar.reshape(scalar.shape + (1,) * (like.dim() - scalar.dim())).to(like.dtype)


def adam(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, vmax: Tensor | None, step: Tensor | None, lr: float,
         beta1: float, beta2: float, eps: float, weight_decay: float = 0.0, decoupled: bool = False,
         bias_correction: bool = True, amsgrad: bool = False,
         eps_inside_sqrt: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """One Adam step on a client; returns (param, m, v, vmax). `step` is this step's 1-based index t (a tensor:
    0-d, or [clients] for stacked clients); it is read only for bias correction. `vmax` is AMSGrad's running
    maximum of v (None without amsgrad).

        g = grad + wd * param                       (weight decay as L2, unless decoupled)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g^2
        vmax = max(vmax, v); use vmax for v below   (amsgrad)
        mhat, vhat = m / (1 - b1^t), v / (1 - b2^t) (bias_correction; else m, v)
        param = param * (1 - lr * wd)                (decoupled: AdamW)
        param = param - lr * mhat / (sqrt(vhat) + eps)    or, eps_inside_sqrt,  lr * mhat / sqrt(vhat + eps)

    With the defaults this is torch.optim.Adam (amsgrad included, the max taken of the uncorrected v as torch
    does); decoupled=True is torch.optim.AdamW. The papers' variants:
      FedAdam-SSM (Deng et al., eqs. 3-5): bias_correction=False, eps_inside_sqrt=True.
      FAdamGT / FAdamET / LocalAdam (Chen et al. 2025, Alg. 1): bias_correction=False, amsgrad=True.
      FAFED as run in FedLion's released code: torch.optim.AdamW (decoupled=True, bias corrected).
    Everything is elementwise; Python branches only on the flags, never on tensor values."""
    if weight_decay and not decoupled:
        grad = grad + weight_decay * param
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad.square()
    if amsgrad:
        vmax = torch.maximum(vmax, v)
    second = vmax if amsgrad else v
    if decoupled and weight_decay:
        param = param * (1 - lr * weight_decay)
    if bias_correction:
        step = step.to(torch.float64)  # the factors in double, as torch computes them in Python floats
        step_size = per_client(lr / (1 - beta1 ** step), param)
        correction2 = 1 - beta2 ** step
        if eps_inside_sqrt:
            denom = (second / per_client(correction2, param) + eps).sqrt()
        else:
            denom = second.sqrt() / per_client(correction2.sqrt(), param) + eps
        return param - step_size * (m / denom), m, v, vmax
    denom = (second + eps).sqrt() if eps_inside_sqrt else second.sqrt() + eps
    return param - lr * (m / denom), m, v, vmax


def lion(param: Tensor, grad: Tensor, m: Tensor, lr: float, beta1: float, beta2: float,
         weight_decay: float = 0.0) -> tuple[Tensor, Tensor]:
    """One Lion step (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", Algorithm 2); returns
    (param, m). FedLion's local step (Tang & Chang 2024, Alg. 1) is the same rule with weight_decay 0.

        c = b1 * m + (1 - b1) * g;   param = param - lr * (sign(c) + wd * param);   m = b2 * m + (1 - b2) * g

    sign(0) = 0, as torch.sign gives."""
    update = torch.sign(beta1 * m + (1 - beta1) * grad)
    if weight_decay:
        update = update + weight_decay * param
    return param - lr * update, beta2 * m + (1 - beta2) * grad


def clip_by_norm(grads: dict[str, Tensor], max_norm: float, clients: bool = False) -> dict[str, Tensor]:
    """Gradients scaled so that their global L2 norm (over every tensor) is at most max_norm, as
    torch.nn.utils.clip_grad_norm_ does: scaled by min(1, max_norm / (norm + 1e-6)). With `clients`, each tensor
    has a leading client dimension and each client's gradients are clipped by their own norm."""
    dims = (lambda g: tuple(range(1, g.dim()))) if clients else (lambda g: tuple(range(g.dim())))
    norm = torch.sqrt(sum(g.square().sum(dim=dims(g)) for g in grads.values()))
    scale = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    return {n: g * (per_client(scale, g) if clients else scale) for n, g in grads.items()}

