"""What every executor shares: a training job (a task, the model as its device decoded it, its samples and its
random stream) and where a device's training starts. The loss and scoring they use: testbed/functional.py."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from testbed.algorithms.base import Params, Strategy, Task
from testbed.contracts import started


@dataclass(frozen=True)
class TrainJob:
    task: Task
    params: Params                  # the model as the device decoded it
    indices: np.ndarray             # the device's training samples
    stream: tuple[int, ...]         # (scenario seed, *spawn key) of the (device, round) training stream

    @property
    def seed(self) -> np.random.SeedSequence:
        """The job's random stream, made where the job trains rather than in the engine's loop (~7 us each, 7 ms of
        a 1,000-job round); the tuple also pickles smaller to a worker."""
        return np.random.SeedSequence(self.stream[0], spawn_key=self.stream[1:])


def starting_point(strategy: Strategy, job: TrainJob) -> tuple[Params, Params | None]:
    """What the device trains from, and its optimizer's starting state: the strategy's start(task, received),
    which folds in what the device kept (FedLPS's scores, FAdamGT's moments), or the model as received."""
    return started(strategy, strategy.start(job.task, job.params))
