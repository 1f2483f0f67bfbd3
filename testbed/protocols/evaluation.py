"""Evaluating the global model on schedule, as every protocol does at the end of a round (an aggregation).

- When: every eval.every_rounds rounds, or with eval.every_s the first round to end at or after each multiple of
  it; and the run's last round.
- On what: the held-out test set, or a fixed random subset of eval.max_samples of it (drawn once from the run's
  evaluation stream). With local test sets, each device is also scored on its own test data, with its personal
  model where the strategy keeps one (FedLPS's sparse models) and the global model otherwise.
- What: accuracy and loss; with local test sets, the mean and 10th percentile of the devices' accuracies.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from testbed.algorithms.base import ServerState
from testbed.execution import evaluate, score
from testbed.scenario import Experiment, Purpose, stream


class Evaluation:
    """The run's evaluation: its test set, its schedule and its scores."""

    def __init__(self, exp: Experiment):
        self.exp = exp
        self.cfg = exp.scenario.eval
        self.test_x, self.test_y = self._test_set(exp.scenario.seed)

    def _test_set(self, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The held-out test set, or a fixed random subset of it when eval.max_samples asks for one."""
        data, cap = self.exp.dataset, self.cfg.max_samples
        if cap is None or cap >= len(data.test_y):
            return data.test_x, data.test_y
        rng = np.random.default_rng(stream(seed, Purpose.EVALUATION))
        keep = torch.from_numpy(np.sort(rng.choice(len(data.test_y), cap, replace=False)))
        return data.test_x[keep], data.test_y[keep]

    def due(self, r: int, t_previous: float, t: float, final: bool) -> bool:
        """Whether round (aggregation) r, ending at t after the previous one ended at t_previous, is evaluated."""
        every_s = self.cfg.every_s
        if every_s is not None:
            return final or math.floor(t / every_s) > math.floor(t_previous / every_s)
        return final or r % self.cfg.every_rounds == 0

    def scores(self, state: ServerState) -> dict[str, float]:
        """The global model's test accuracy and loss; with local test sets, each device's accuracy on its own
        test data (mean and 10th percentile over devices), with its personal model where the strategy keeps one
        and the global model otherwise."""
        model, params = self.exp.model, state.params
        accuracy, loss = evaluate(model, params, self.test_x, self.test_y)
        scores = {"accuracy": accuracy, "loss": loss}
        clients = self.exp.clients
        if clients.local_test_x is not None:
            correct, _ = score(model, params, clients.local_test_x, clients.local_test_y)
            for d, own in self.exp.strategy.personal_models(state).items():
                rows = torch.from_numpy(np.flatnonzero(clients.local_test_owner == d))
                if len(rows):
                    correct[rows.numpy()] = score(model, own, clients.local_test_x[rows], clients.local_test_y[rows])[0]
            sizes = clients.local_test_sizes()
            per_device = np.bincount(clients.local_test_owner, weights=correct, minlength=len(sizes))[sizes > 0]
            per_device = per_device / sizes[sizes > 0]
            scores |= {"local_accuracy": float(per_device.mean()),
                       "local_accuracy_p10": float(np.percentile(per_device, 10))}
        return scores
