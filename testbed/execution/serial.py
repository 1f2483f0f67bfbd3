"""The reference executor: one client after another, in this process."""
from __future__ import annotations

import numpy as np
import torch

from testbed.algorithms.base import Result, Strategy
from testbed.data.dataset import Dataset
from testbed.errors import TestbedError
from testbed.execution.common import TrainJob, starting_point
from testbed.execution.device import home_of, model_on, moved, training_device
from testbed.execution.precision import arithmetic
from testbed.functional import make_loss_fn
from testbed.local import train_one


class SerialExecutor:
    def __init__(self, model: torch.nn.Module, dataset: Dataset, device: str = "cpu", precision: str = "exact"):
        self.device = training_device(device)
        self.precision = precision
        self.loss_fn = make_loss_fn(model_on(model, self.device))
        self.train_x, self.train_y = moved((dataset.train_x, dataset.train_y), self.device)

    def data(self, job: TrainJob) -> tuple[torch.Tensor, torch.Tensor]:
        index = torch.from_numpy(job.indices).to(self.device)
        return self.train_x[index], self.train_y[index]

    def start(self, strategy: Strategy, job: TrainJob):
        """The job's starting point (parameters, optimizer state) and the strategy's extras, on the device."""
        return moved((starting_point(strategy, job), job.task.extras), self.device)

    def train(self, strategy: Strategy, jobs: list[TrainJob]) -> list[Result]:
        with arithmetic(self.device, self.precision):
            try:
                return self._train(strategy, jobs)
            except torch.OutOfMemoryError:
                raise TestbedError(f"executor: a client's training does not fit the memory of {self.device}; use a "
                                   "smaller model or client.batch_size, or train on the CPU") from None

    def _train(self, strategy: Strategy, jobs: list[TrainJob]) -> list[Result]:
        objective = strategy.objective(self.loss_fn)
        results = []
        for job in jobs:
            x, y = self.data(job)
            (params, state), extras = self.start(strategy, job)
            # back where the job's model came from: the CPU, or the device where the server lives there too
            trained, stats, state = moved(train_one(objective, params, x, y, strategy.client,
                                                    np.random.default_rng(job.seed), extras, state),
                                          home_of(job.params))
            results.append(strategy.finish(job.task, trained, job.params, stats, state))
        return results

    def close(self) -> None:
        pass
