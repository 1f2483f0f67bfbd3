"""The batched executor: the clients of a round trained together, stacked on a leading client dimension
(torch.func.vmap over functional_call), with the same objective and update rule as the serial executor.

vmap has no batching rule for recurrent layers (nn.LSTM / GRU / RNN): such models fall back to training the
clients one by one, and the log says so once.

Memory: a group of executor.max_clients clients (the whole round by default) trains at once. A group that does
not fit the GPU's memory is split in halves and trained again, and later rounds use the size that fitted (each
job carries its own seed, so the results are those of one group); a single client that does not fit stops the
run in one line, the rounds before it kept.
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
        self.fits: int | None = None    # the group size that fitted after a group ran out of memory
        self.recurrent = any(isinstance(m, torch.nn.RNNBase) for m in model.modules())
        if self.recurrent:
            log.warning("batched executor: vmap has no rule for %s's recurrent layers; training its clients "
                        "one by one", type(model).__name__)

    def _train(self, strategy: Strategy, jobs: list[TrainJob]) -> list[Result]:
        if self.recurrent:
            return super()._train(strategy, jobs)
        objective = strategy.objective(self.loss_fn)
        results, start = [], 0
        while start < len(jobs):
            group = jobs[start : start + min(self.max_clients or len(jobs), self.fits or len(jobs))]
            try:
                trained = self._group(strategy, objective, group)
            except torch.OutOfMemoryError:
                if len(group) == 1:
                    raise   # the serial executor's one line
                self.fits = len(group) // 2   # a smaller group from now on, this one again
                log.warning("batched executor: %d clients did not fit %s's memory; %d at a time from now on "
                            "(executor.max_clients sets it)", len(group), self.device, self.fits)
                continue
            results += trained
            start += len(group)
        return results

    def _group(self, strategy: Strategy, objective, group: list[TrainJob]) -> list[Result]:
        """One group's clients trained together."""
        data = [self.data(job) for job in group]
        starts = [self.start(strategy, job) for job in group]
        trained = train_stacked(objective, [params for (params, _), _ in starts], [x for x, _ in data],
                                [y for _, y in data], strategy.client,
                                [np.random.default_rng(job.seed) for job in group],
                                [extras for _, extras in starts], [state for (_, state), _ in starts])
        return [strategy.finish(job.task, params, job.params, stats, state)
                for job, (params, stats, state) in zip(group, moved(trained, home_of(group[0].params)))]
