"""Local training, written once: minibatch passes over a client's data with a pure update rule.

Gradients come from torch.func on a functional loss(params, x, y), so the same loop serves every executor.
The sample order of each epoch comes from the (device, round) generator: reproducible whatever runs it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.func import grad_and_value

from testbed import rules
from testbed.algorithms.base import LossFn, Params


@dataclass(frozen=True)
class LocalSGD:
    lr: float
    local_epochs: int = 1
    batch_size: int = 10
    momentum: float = 0.0
    weight_decay: float = 0.0

    def samples_processed(self, num_samples: int) -> int:
        return self.local_epochs * num_samples


def train_sgd(loss_fn: LossFn, params: Params, x: torch.Tensor, y: torch.Tensor, cfg: LocalSGD,
              rng: np.random.Generator) -> tuple[Params, float]:
    """Run cfg.local_epochs epochs of minibatch SGD; return the trained parameters and the mean batch loss."""
    step = grad_and_value(loss_fn)
    buffers: dict[str, torch.Tensor | None] = dict.fromkeys(params)
    losses = []
    for _ in range(cfg.local_epochs):
        order = torch.from_numpy(rng.permutation(len(y)))
        for batch in order.split(cfg.batch_size):
            grads, loss = step(params, x[batch], y[batch])
            new = {}
            for name, p in params.items():
                new[name], buffers[name] = rules.sgd(p, grads[name], buffers[name], cfg.lr, cfg.momentum,
                                                     cfg.weight_decay)
            params = new
            losses.append(loss.item())
    return params, float(np.mean(losses))
