"""The reference executor: one client after another, in this process."""
from __future__ import annotations

import numpy as np
import torch

from testbed.algorithms.base import Params, Strategy
from testbed.data.dataset import Dataset
from testbed.execution.common import TrainJob, make_loss_fn


class SerialExecutor:
    def __init__(self, model: torch.nn.Module, dataset: Dataset):
        self.loss_fn = make_loss_fn(model)
        self.dataset = dataset

    def train(self, strategy: Strategy, jobs: list[TrainJob]) -> list[tuple[Params, dict[str, float]]]:
        results = []
        for job in jobs:
            index = torch.from_numpy(job.indices)
            x, y = self.dataset.train_x[index], self.dataset.train_y[index]
            results.append(strategy.client_update(job.task, job.params, x, y, self.loss_fn,
                                                  np.random.default_rng(job.seed)))
        return results
