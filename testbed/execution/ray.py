"""The Ray executor: a round's clients shipped in contiguous batches to Ray workers, each of which trains its
batch with the batched executor. Local (`address: null` starts Ray on this machine with `workers` CPUs) or a
cluster (`address: auto` or `ray://host:port`). Each job carries its own seed, so the results are those of
the serial executor, whatever the number of workers.
"""
from __future__ import annotations

import os

import numpy as np
import torch

from testbed.algorithms.base import Result, Strategy
from testbed.errors import TestbedError
from testbed.execution.batched import BatchedExecutor
from testbed.execution.common import TrainJob
from testbed.execution.threads import DEFAULT_THREADS


class _Worker:
    def __init__(self, model: torch.nn.Module, dataset, device: str, threads: int | None, precision: str):
        torch.set_num_threads(threads or DEFAULT_THREADS)  # as the run's own: the same arithmetic in every worker
        self.executor = BatchedExecutor(model, dataset, device=device, precision=precision)

    def train(self, strategy: Strategy, jobs: list[TrainJob]):
        return self.executor.train(strategy, jobs)


def start_ray(address: str | None, num_cpus: int | None, needed_by: str):
    """Ray, started here (address None: on this machine with num_cpus) unless it already runs; returns the module
    and whether this call started it (and so should shut it down). `needed_by` names what asks, in the error."""
    try:
        import ray
    except ImportError:
        raise TestbedError(f"{needed_by} needs Ray; install it with pip install -e '.[ray]'") from None
    started = not ray.is_initialized()
    if started:
        # keep Ray's hands off device visibility on CPU-only workers (and its warning about it)
        os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
        ray.init(address=address, num_cpus=num_cpus if address is None else None, include_dashboard=False,
                 log_to_driver=False, logging_level="ERROR")
    return ray, started


class RayExecutor:
    def __init__(self, model: torch.nn.Module, dataset, workers: int = 2, address: str | None = None,
                 device: str = "cpu", threads: int | None = None, precision: str = "exact"):
        ray, self.started_ray = start_ray(address, workers, "executor.kind: ray")
        self.ray = ray
        gpus = 0
        if device == "cuda":  # a GPU each on a cluster; the workers share this machine's GPU
            if not ray.cluster_resources().get("GPU", 0):
                self.close()
                raise TestbedError("executor.device: cuda, but the Ray cluster has no GPU; set executor.device: cpu")
            gpus = 1 if address else 1 / workers
        worker = ray.remote(num_cpus=1, num_gpus=gpus)(_Worker)
        model_ref, data_ref = ray.put(model), ray.put(dataset)
        self._start_worker = lambda: worker.remote(model_ref, data_ref, device, threads, precision)
        self.workers = [self._start_worker() for _ in range(workers)]

    def train(self, strategy: Strategy, jobs: list[TrainJob]) -> list[Result]:
        """A worker that dies with its batch (killed, out of memory, its node lost) is replaced by a fresh one that
        trains the same batch once more: each job carries its own seeds, so the results are the same. A second
        death in the round stops the run in one line."""
        shares = [share for share in np.array_split(np.arange(len(jobs)), len(self.workers)) if len(share)]
        batches = [[jobs[i] for i in share] for share in shares]
        futures = [w.train.remote(strategy, batch) for w, batch in zip(self.workers, batches)]
        results = []
        for slot, (future, batch) in enumerate(zip(futures, batches)):
            try:
                results += self.ray.get(future)
            except self.ray.exceptions.RayActorError:
                self.workers[slot] = self._start_worker()
                try:
                    results += self.ray.get(self.workers[slot].train.remote(strategy, batch))
                except self.ray.exceptions.RayActorError as err:
                    raise TestbedError(f"executor.kind ray: a worker died in the middle of a round and so did the one "
                                       f"that took its batch over ({type(err).__name__}); the rounds before it are "
                                       "kept, and --resume goes on from the last checkpoint") from None
        return results

    def close(self) -> None:
        for w in getattr(self, "workers", []):
            self.ray.kill(w)
        if self.started_ray:
            self.ray.shutdown()
