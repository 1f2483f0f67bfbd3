"""Local training, written once for every executor.

A strategy supplies an objective (params, anchor, x, y) -> loss and a local optimizer (elementwise pure rules
from rules.py); this module supplies the minibatch schedule and two loops that apply them: one client at a time
(serial executor) or many clients stacked along a leading dimension (batched executor, torch.func.vmap).
Both loops draw each epoch's sample order from the client's own (device, round) generator, so they train on
the same minibatches in the same order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch.func import grad_and_value, vmap

from testbed import rules
from testbed.algorithms.base import Params

Objective = Callable[[Params, Params, torch.Tensor, torch.Tensor], torch.Tensor]  # (params, anchor, x, y)


@dataclass(frozen=True)
class LocalSGD:
    """Minibatch SGD as torch.optim.SGD defines it, for `local_epochs` passes over the client's data."""

    lr: float
    local_epochs: int = 1
    batch_size: int = 10
    momentum: float = 0.0
    weight_decay: float = 0.0

    def samples_processed(self, num_samples: int) -> int:
        return self.local_epochs * num_samples

    def init(self, params: Params) -> Params:
        """Momentum buffers start at zero: torch's first step (buffer = gradient) is then the same step."""
        return {n: torch.zeros_like(p) for n, p in params.items()} if self.momentum else {}

    def step(self, params: Params, grads: Params, state: Params) -> tuple[Params, Params]:
        new, buffers = {}, {}
        for n, p in params.items():
            new[n], buffers[n] = rules.sgd(p, grads[n], state.get(n), self.lr, self.momentum, self.weight_decay)
        return new, (buffers if self.momentum else {})


def minibatches(num_samples: int, cfg: LocalSGD, rng: np.random.Generator) -> list[torch.Tensor]:
    """The client's minibatches, epoch after epoch, each epoch in a fresh random order."""
    return [batch for _ in range(cfg.local_epochs)
            for batch in torch.from_numpy(rng.permutation(num_samples)).split(cfg.batch_size)]


def train_one(objective: Objective, params: Params, x: torch.Tensor, y: torch.Tensor, cfg: LocalSGD,
              rng: np.random.Generator) -> tuple[Params, float]:
    """Train one client from `params` (also the anchor); return its parameters and mean batch loss."""
    step = grad_and_value(objective)
    anchor, state, losses = params, cfg.init(params), []
    for batch in minibatches(len(y), cfg, rng):
        grads, loss = step(params, anchor, x[batch], y[batch])
        params, state = cfg.step(params, grads, state)
        losses.append(loss.item())
    return params, float(np.mean(losses))


def train_stacked(objective: Objective, params: list[Params], xs: list[torch.Tensor], ys: list[torch.Tensor],
                  cfg: LocalSGD, rngs: list[np.random.Generator]) -> list[tuple[Params, float]]:
    """Train several clients together: parameters stacked on a leading client dimension, one vmapped gradient
    per step for all clients whose minibatch has the same size. Clients that run out of minibatches stop
    changing; nothing is padded, so batch statistics (BatchNorm without running statistics) stay exact."""
    schedules = [minibatches(len(y), cfg, rng) for y, rng in zip(ys, rngs)]
    stacked = {n: torch.stack([p[n] for p in params]) for n in params[0]}
    anchor, state = stacked, cfg.init(stacked)
    step = vmap(grad_and_value(objective))
    loss_sums, loss_counts = [0.0] * len(params), [0] * len(params)
    for t in range(max(len(s) for s in schedules)):
        by_size: dict[int, list[int]] = {}
        for client, schedule in enumerate(schedules):
            if t < len(schedule):
                by_size.setdefault(len(schedule[t]), []).append(client)
        for clients in by_size.values():
            rows = torch.tensor(clients)
            everyone = len(clients) == len(params)
            take = (lambda tree: tree) if everyone else (lambda tree: {n: v[rows] for n, v in tree.items()})
            x = torch.stack([xs[c][schedules[c][t]] for c in clients])
            y = torch.stack([ys[c][schedules[c][t]] for c in clients])
            grads, losses = step(take(stacked), take(anchor), x, y)
            new, new_state = cfg.step(take(stacked), grads, take(state))
            if everyone:
                stacked, state = new, new_state
            else:
                stacked = {n: v.index_copy(0, rows, new[n]) for n, v in stacked.items()}
                state = {n: v.index_copy(0, rows, new_state[n]) for n, v in state.items()}
            for client, loss in zip(clients, losses.tolist()):
                loss_sums[client] += loss
                loss_counts[client] += 1
    return [({n: v[i] for n, v in stacked.items()}, loss_sums[i] / loss_counts[i]) for i in range(len(params))]
