"""Evaluating the global model on schedule, as every protocol does at the end of a round (an aggregation).

- When: every eval.every_rounds rounds, or with eval.every_s the first round to end at or after each multiple of
  it; and the run's last round.
- On what: the held-out test set, or a fixed random subset of eval.max_samples of it (drawn once from the run's
  evaluation stream). With local test sets, each device is also scored on its own test data, with its personal
  model where the strategy keeps one (FedLPS's sparse models) and the global model otherwise.
- What: accuracy and loss; with local test sets, the mean and 10th percentile of the devices' accuracies.
- Where: on the training device (testbed/execution/placement.py), in executor.precision; the test sets move
  there once, and a model the server keeps on the CPU is copied there for each evaluation.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from testbed.algorithms.base import Params, ServerState
from testbed.execution import evaluate, score
from testbed.execution.device import model_on, moved
from testbed.execution.placement import Placement
from testbed.execution.processes import ProcessExecutor
from testbed.execution.precision import arithmetic
from testbed.experiment import Experiment, Purpose, stream


class Evaluation:
    """The run's evaluation: its test set, its schedule and its scores."""

    def __init__(self, exp: Experiment, placement: Placement, contracts=None):
        self.exp = exp
        self.contracts = contracts   # checks the strategy's personal models (testbed/contracts.py)
        self.cfg = exp.scenario.eval
        self.device, self.precision = placement.evaluation, placement.precision
        self.model = model_on(exp.model, self.device)
        # worker processes (executor.workers) compute the logits, the run the scores: the tables of one process
        self.all_logits = exp.executor.logits if isinstance(exp.executor, ProcessExecutor) else None
        self.test_x, self.test_y = moved(self._test_set(exp.scenario.seed), self.device)
        clients = exp.clients
        self.local_test = None if clients.local_test_x is None else \
            moved((clients.local_test_x, clients.local_test_y), self.device)

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

    def score(self, params: Params, x: torch.Tensor, y: torch.Tensor) -> tuple[np.ndarray, float]:
        """execution.score of `params` on (x, y), on the evaluation's device and in its precision."""
        return self._here(score, params, x, y)

    def evaluate(self, params: Params, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
        """(accuracy, mean cross-entropy) of `params` on (x, y), as score."""
        return self._here(evaluate, params, x, y)

    def _here(self, scoring, params: Params, x: torch.Tensor, y: torch.Tensor):
        with arithmetic(self.device, self.precision):
            return scoring(self.model, moved(params, self.device), moved(x, self.device), moved(y, self.device),
                           self.all_logits)

    def scores(self, state: ServerState) -> dict[str, float]:
        """The global model's test accuracy and loss; with local test sets, each device's accuracy on its own
        test data (mean and 10th percentile over devices), with its personal model where the strategy keeps one
        and the global model otherwise."""
        params = moved(state.params, self.device)   # a copy to the device where the server keeps it on the CPU
        accuracy, loss = self.evaluate(params, self.test_x, self.test_y)
        scores = {"accuracy": accuracy, "loss": loss}
        clients = self.exp.clients
        if self.local_test is not None:
            local_x, local_y = self.local_test
            correct, _ = self.score(params, local_x, local_y)
            personal = self.exp.strategy.personal_models(state)
            for d, own in (personal if self.contracts is None else self.contracts.personal(personal)).items():
                rows = torch.from_numpy(np.flatnonzero(clients.local_test_owner == d))
                if len(rows):
                    rows_here = rows.to(self.device)
                    correct[rows.numpy()] = self.score(own, local_x[rows_here], local_y[rows_here])[0]
            sizes = clients.local_test_sizes()
            per_device = np.bincount(clients.local_test_owner, weights=correct, minlength=len(sizes))[sizes > 0]
            per_device = per_device / sizes[sizes > 0]
            scores |= {"local_accuracy": float(per_device.mean()),
                       "local_accuracy_p10": float(np.percentile(per_device, 10))}
        return scores
