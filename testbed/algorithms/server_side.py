"""What a server does with its own data (FedDUMAP, Hybrid-FL), and what it costs in FLOPs.

The server trains with the devices' local optimizer and minibatch schedule (the spec's recommendation; the paper
does not say), from its own seeded stream, so a run is the same whatever the executor. The caller counts the FLOPs
(testbed/flops.py: training 3 forwards per sample, scoring 1, a Hessian-vector product HVP_FORWARDS).
"""
from __future__ import annotations

import numpy as np
import torch

from testbed.algorithms.hessian import gap_rate, hessian_vector_product, lanczos_density
from testbed.local import LocalSGD, train_one

Params = dict[str, torch.Tensor]


def _loss_fn(model: torch.nn.Module):
    from testbed.execution.common import make_loss_fn  # imported here: testbed.execution imports the algorithms

    return make_loss_fn(model)


def server_sgd(model: torch.nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor, client: LocalSGD,
               rng: np.random.Generator, held: Params | None = None) -> tuple[Params, int]:
    """The client's schedule on (x, y) from `params`, entries where `held` is 0 frozen: (trained, samples
    processed)."""
    loss_fn = _loss_fn(model)

    def objective(p, anchor, xb, yb, extras):
        loss, accuracy = loss_fn(p, xb, yb)
        return loss, {"accuracy": accuracy} | ({"update_mask": held} if held is not None else {})

    trained, _, _ = train_one(objective, params, x, y, client, rng)
    return trained, client.samples_processed(len(y))


def server_accuracy(model: torch.nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float(_loss_fn(model)(params, x, y)[1])


def hessian_rates(model: torch.nn.Module, params: Params, participants: list[tuple[torch.Tensor, torch.Tensor]],
                  steps: int, rngs: list[np.random.Generator]) -> np.ndarray:
    """p*_k of each participant: the gap rate of the Lanczos density of its loss's Hessian at `params`."""
    loss_fn = _loss_fn(model)
    rates = []
    for (x, y), rng in zip(participants, rngs):
        hvp = hessian_vector_product(lambda p: loss_fn(p, x, y)[0], params)
        rates.append(gap_rate(*lanczos_density(hvp, params, steps, rng)))
    return np.array(rates)
