"""What a device's task does besides its clock, once the protocol has planned it: a part of the kit (kit.py), its
`work`.

- `deliver`: the model as each downlink codec delivers it to a device (what the strategy broadcasts, encoded and
  decoded);
- `train`: the real training of the tasks whose updates the server uses, each from the model it was sent, by the
  run's executor; their updates as the server decodes them (checked by the strategy's contract, and against the
  upload the clock was planned with), each times its weight where given (FedBuff's staleness scaling);
- `drain`: a round's (or a task's) phases drain their devices' batteries; `idle_energy`: whether a device that
  uploaded before its synchronous round closed pays for its wait (testbed/resources/).
"""
from __future__ import annotations

import numpy as np
import torch

from testbed.algorithms.base import Arrival, Params, ServerState, Strategy, Task
from testbed.clock import Phase, Timeline
from testbed.contracts import Contracts
from testbed.execution import TrainJob
from testbed.experiment import Purpose
from testbed.payload import transmit
from testbed.protocols.planning import Planner
from testbed.resources import Resources


def scaled(updates: list[Params], weights: list[float]) -> list[Params]:
    """Each update times its weight, entry by entry (weight * tensor, the same floats): one torch call for all
    of them, where a product a tensor costs an asynchronous aggregation ~5 us an update and parameter."""
    flat = [u for update in updates for u in update.values()]
    if not flat:
        return updates
    products = iter(torch._foreach_mul(flat, [w for update, w in zip(updates, weights) for _ in update]))
    return [{n: next(products) for n in update} for update in updates]


class TaskWork:
    """The tasks' work of one run. `executor`: trains (testbed/execution/); `partition`: each device's training
    samples (indices into the dataset); `seed`: the scenario's, for each task's training stream; `shapes`: the
    model's parameter shapes; `planner`: the codecs' sizes the clock was planned with."""

    def __init__(self, strategy: Strategy, contracts: Contracts, executor, partition: list[np.ndarray], seed: int,
                 shapes: dict, planner: Planner, resources: Resources):
        self._strategy, self._contracts, self._executor = strategy, contracts, executor
        self._partition, self._seed, self._shapes = partition, seed, shapes
        self._planner, self._resources = planner, resources

    @property
    def idle_energy(self) -> bool:
        """Whether a device that uploaded before its synchronous round closed pays for its wait (resources)."""
        return self._resources.idle_energy

    def drain(self, phases: list[Phase]) -> None:
        """These phases (a round's, or a task's) drain their devices' batteries, each device's in order."""
        self._resources.drain_all(phases)

    def deliver(self, state: ServerState, codecs) -> dict:
        """The model as each downlink codec delivers it to a device: what the strategy broadcasts (the model;
        FedAdam adds its moments), encoded and decoded."""
        sent = self._strategy.broadcast(state)
        return {codec: transmit(codec, sent, self._shapes) for codec in codecs}

    def train(self, work: list[tuple[Task, Timeline, Params]], weights: list[float] | None = None) -> list[Arrival]:
        """Real training of the tasks whose updates the server uses, each from the model it received, in the
        given order; their arrivals as the server decodes them, each update times its weight where `weights` are
        given (FedBuff's staleness scaling)."""
        jobs = [TrainJob(task, received, self._partition[task.device],
                         (self._seed, Purpose.TRAINING, task.round, task.device))
                for task, _, received in work]
        results = self._executor.train(self._strategy, jobs)
        self._contracts.results(results, [task for task, _, _ in work])
        updates = []
        for (task, timeline, _), result in zip(work, results):
            up = result.up or task.up
            sent = self._planner.payload_bytes(up)
            if sent != timeline.bytes_up:  # the clock was planned with the task's codec
                raise AssertionError(f"device {task.device}: uploads {sent} bytes, "
                                     f"the round was planned with {timeline.bytes_up}")
            updates.append(transmit(up, result.update, self._shapes))
        if weights is not None:
            updates = scaled(updates, weights)
        return [Arrival(task.device, task.num_samples, update, result.metrics, result.local_state, timeline, task)
                for (task, timeline, _), result, update in zip(work, results, updates)]
