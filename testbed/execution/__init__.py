"""Executors run the real local training of the tasks whose updates the server will use.

An executor's only verb is `train(strategy, jobs) -> [(update, metrics)]`, in job order. Each job carries its
own seed, so results do not depend on which executor runs it, nor in what order.
"""
from testbed.execution.common import TrainJob, evaluate, make_loss_fn, score
from testbed.execution.serial import SerialExecutor

EXECUTORS = {"serial": SerialExecutor}

__all__ = ["EXECUTORS", "SerialExecutor", "TrainJob", "evaluate", "make_loss_fn", "score"]
