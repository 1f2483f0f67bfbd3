"""FedNova: Wang et al., "Tackling the Objective Inconsistency Problem in Heterogeneous Federated Optimization"
(NeurIPS 2020), as a testbed plugin (docs/extending.md).

Update rule, with plain local SGD: device i runs tau_i minibatch steps from the global model x and sends
Delta_i = y_i - x. The server normalises each update by its steps and rescales by the effective step count:
    x <- x + tau_eff * sum_i p_i Delta_i / tau_i,   tau_eff = sum_i p_i tau_i,   p_i = n_i / sum_j n_j,
over the devices that arrived. Devices with more data (or more epochs) no longer pull the model towards their own
optimum; with equal tau_i it is FedAvg.
Deviations: the paper's general local solvers (momentum, proximal terms) enter through a_i; this is its plain-SGD
case (a_i = tau_i), so it takes `client.momentum: 0`.
"""
from dataclasses import dataclass, field

import torch

from testbed.algorithms.base import ServerState, Strategy
from testbed.local import LocalSGD
from testbed.payload import Dense


@dataclass(frozen=True)
class FedNova(Strategy):
    client: LocalSGD                                  # filled in from the scenario's client: section
    down: Dense = field(default_factory=Dense)        # and its codec: section
    up: Dense = field(default_factory=Dense)

    def __post_init__(self):
        if self.client.momentum:
            raise ValueError("FedNova's plain-SGD rule needs client.momentum: 0")

    def aggregate(self, state, round, arrivals, failures):
        if not arrivals:  # nobody made it: the model stays
            return state, {}
        samples = torch.tensor([a.num_samples for a in arrivals], dtype=torch.float64)
        p = samples / samples.sum()
        tau = torch.tensor([len(self.client.batch_sizes(a.num_samples)) for a in arrivals], dtype=torch.float64)
        tau_eff = float((p * tau).sum())
        weights = [float(w) for w in tau_eff * p / tau]
        params = {name: x + sum(w * a.update[name] for w, a in zip(weights, arrivals))
                  for name, x in state.params.items()}
        train_loss = float(sum(float(w) * a.metrics["train_loss"] for w, a in zip(p, arrivals)))
        return ServerState(params), {"train_loss": train_loss}
