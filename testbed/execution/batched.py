"""The batched executor: the clients of a round trained together, stacked on a leading client dimension
(torch.func.vmap over functional_call), with the same objective and update rule as the serial executor.

vmap has no batching rule for recurrent layers (nn.LSTM / GRU / RNN): such models fall back to training the
clients one by one, and the log says so once.
"""
from __future__ import annotations

import logging

import numpy as np
import torch

from testbed.algorithms.base import Result, Strategy
from testbed.execution.common import TrainJob
from testbed.execution.device import home_of, moved
from testbed.execution.serial import SerialExecutor
from testbed.local import train_stacked

log = logging.getLogger("testbed")


class BatchedExecutor(SerialExecutor):
    def __init__(self, model: torch.nn.Module, dataset, max_clients: int | None = None, device: str = "cpu",
                 precision: str = "exact"):
        super().__init__(model, dataset, device, precision)
        self.max_clients = max_clients  # clients per vmapped group: bounds memory on big rounds
        self.recurrent = any(isinstance(m, torch.nn.RNNBase) for m in model.modules())
        if self.recurrent:
            log.warning("batched executor: vmap has no rule for %s's recurrent layers; training its clients "
                        "one by one", type(model).__name__)

    def _train(self, strategy: Strategy, jobs: list[TrainJob]) -> list[Result]:
        if self.recurrent:
            return super()._train(strategy, jobs)
        objective = strategy.objective(self.loss_fn)
        size = self.max_clients or max(len(jobs), 1)
        results = []
        for start in range(0, len(jobs), size):
            group = jobs[start : start + size]
            data = [self.data(job) for job in group]
            starts = [self.start(strategy, job) for job in group]
            trained = train_stacked(objective, [params for (params, _), _ in starts], [x for x, _ in data],
                                    [y for _, y in data], strategy.client,
                                    [np.random.default_rng(job.seed) for job in group],
                                    [extras for _, extras in starts], [state for (_, state), _ in starts])
            results += [strategy.finish(job.task, params, job.params, stats, state)
                        for job, (params, stats, state) in zip(group, moved(trained, home_of(group[0].params)))]
        return results
