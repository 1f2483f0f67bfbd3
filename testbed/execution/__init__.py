"""Executors run the real local training of the tasks whose updates the server will use.

An executor's verbs are `train(strategy, jobs) -> [Result]`, in job order, and `close()`. Each job
carries its own seed, so results do not depend on which executor runs it, nor in what order.
"""
from testbed.execution.batched import BatchedExecutor
from testbed.execution.common import TrainJob
from testbed.execution.ray import RayExecutor
from testbed.execution.serial import SerialExecutor
from testbed.functional import evaluate, make_loss_fn, score  # re-exported: where callers find them

EXECUTORS = {"serial": SerialExecutor, "batched": BatchedExecutor, "ray": RayExecutor}

__all__ = ["EXECUTORS", "BatchedExecutor", "RayExecutor", "SerialExecutor", "TrainJob", "evaluate",
           "make_loss_fn", "score"]
