"""The reference executor: one client after another, in this process."""
from __future__ import annotations

import numpy as np
import torch

from testbed.algorithms.base import Result, Strategy
from testbed.data.dataset import Dataset
from testbed.execution.common import TrainJob, make_loss_fn, starting_point
from testbed.local import train_one


class SerialExecutor:
    def __init__(self, model: torch.nn.Module, dataset: Dataset):
        self.loss_fn = make_loss_fn(model)
        self.dataset = dataset

    def data(self, job: TrainJob) -> tuple[torch.Tensor, torch.Tensor]:
        index = torch.from_numpy(job.indices)
        return self.dataset.train_x[index], self.dataset.train_y[index]

    def train(self, strategy: Strategy, jobs: list[TrainJob]) -> list[Result]:
        objective = strategy.objective(self.loss_fn)
        results = []
        for job in jobs:
            x, y = self.data(job)
            params, state = starting_point(strategy, job)
            trained, stats, state = train_one(objective, params, x, y, strategy.client,
                                              np.random.default_rng(job.seed), job.task.extras, state)
            results.append(strategy.finish(job.task, trained, job.params, stats, state))
        return results

    def close(self) -> None:
        pass
