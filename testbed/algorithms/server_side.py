"""What a server does with its own data (FedDUMAP, Hybrid-FL), and what it costs in FLOPs.

The server trains with the devices' local optimizer and minibatch schedule (the spec's recommendation; the paper
does not say), from its own seeded stream, so a run is the same whatever the executor. The caller counts the FLOPs
(testbed/flops.py: training 3 forwards per sample, scoring 1, a Hessian-vector product HVP_FORWARDS).
"""
from __future__ import annotations

import numpy as np
import torch

from testbed.algorithms.fedap import aggregate_rate
from testbed.algorithms.hessian import HVP_FORWARDS, gap_rate, hessian_vector_product, lanczos_density
from testbed.data.server import SharedData
from testbed.functional import Params, make_loss_fn
from testbed.local import LocalSGD, train_one

LANCZOS = 1  # the purpose of the server's streams for its Hessian estimates (the SGD's is 0)


def server_sgd(model: torch.nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor, client: LocalSGD,
               rng: np.random.Generator, held: Params | None = None) -> tuple[Params, int]:
    """The client's schedule on (x, y) from `params`, entries where `held` is 0 frozen: (trained, samples
    processed)."""
    loss_fn = make_loss_fn(model)

    def objective(p, anchor, xb, yb, extras):
        loss, accuracy = loss_fn(p, xb, yb)
        return loss, {"accuracy": accuracy} | ({"update_mask": held} if held is not None else {})

    trained, _, _ = train_one(objective, params, x, y, client, rng)
    return trained, client.samples_processed(len(y))


def squared_gradients(model: torch.nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor, batch_size: int,
                      rng: np.random.Generator) -> Params:
    """PruneFL's importance: sum over one pass of shuffled minibatches of the squared gradient of every entry
    (a masked entry's too: it is what would regrow it)."""
    loss_fn, params = make_loss_fn(model), {n: p.detach().requires_grad_() for n, p in params.items()}
    total = {n: torch.zeros_like(p) for n, p in params.items()}
    for batch in torch.from_numpy(rng.permutation(len(y))).split(batch_size):
        grads = torch.autograd.grad(loss_fn(params, x[batch], y[batch])[0], list(params.values()))
        for n, g in zip(params, grads):
            total[n] += g.square()
    return total


def server_accuracy(model: torch.nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float(make_loss_fn(model)(params, x, y)[1])


def hessian_rates(model: torch.nn.Module, params: Params, participants: list[tuple[torch.Tensor, torch.Tensor]],
                  steps: int, rngs: list[np.random.Generator]) -> np.ndarray:
    """p*_k of each participant: the gap rate of the Lanczos density of its loss's Hessian at `params`."""
    loss_fn = make_loss_fn(model)
    rates = []
    for (x, y), rng in zip(participants, rngs):
        hvp = hessian_vector_product(lambda p: loss_fn(p, x, y)[0], params)
        rates.append(gap_rate(*lanczos_density(hvp, params, steps, rng)))
    return np.array(rates)


def estimated_rate(model: torch.nn.Module, shared: SharedData, params: Params, devices: list[int], steps: int,
                   samples: int, forward_flops: int) -> tuple[float, int, list[dict]]:
    """FedAP's p* (Eq. 15) over the server and `devices`, each on its first `samples` samples: (p*, FLOPs of the
    Hessian-vector products, one row per participant)."""
    data = [(shared.x[:samples], shared.y[:samples])] + [shared.device_data(d, samples) for d in devices]
    sizes = [shared.size] + [int(shared.device_histograms[d].sum()) for d in devices]
    degrees = [shared.non_iid_degree] + list(shared.device_degrees()[devices])
    rates = hessian_rates(model, params, data, steps, [shared.rng(LANCZOS, k) for k in range(len(data))])
    flops = HVP_FORWARDS * forward_flops * steps * sum(len(y) for _, y in data)
    rows = [{"participant": who, "samples": n, "non_iid_degree": degree, "rate": rate}
            for who, n, degree, rate in zip(["server", *devices], sizes, degrees, rates)]
    return aggregate_rate(rates, sizes, degrees), flops, rows
