"""Speaking to a Flower strategy in either of its APIs (testbed/algorithms/flower.py is the adapter around them).

- The Message API (flwr.serverapp.strategy, Flower's recommended one): configure_train(round, arrays, config,
  grid) returns Messages to node ids of a Grid; aggregate_train(round, replies) gets reply Messages, each with the
  trained ArrayRecord and a MetricRecord, or an Error for a node that failed.
- The legacy API (flwr.server.strategy): configure_fit(round, parameters, client_manager) returns (ClientProxy,
  FitIns) pairs; aggregate_fit(round, results, failures) gets (ClientProxy, FitRes) pairs and a failures list.
Both speakers offer the strategy exactly the round's cohort (a Grid / ClientManager that never waits or sends:
the testbed's clock does the sending) and return what it sent each device, and then its aggregate as arrays by
parameter name (None: no new model). Imported only when a scenario names a Flower strategy.
"""
from __future__ import annotations

import inspect
import logging
import random
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Error, Message, MetricRecord, RecordDict
from flwr.app.exception import AppExitException
from flwr.common import Code, FitRes, Status, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.common.constant import SUPERLINK_NODE_ID, ErrorCode
from flwr.server.client_manager import SimpleClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy as MessageStrategy
from flwr.supercore.task_identity import TaskIdentity

from testbed.algorithms.base import Arrival, Failure, Params
from testbed.errors import TestbedError

# A failed device's Error code in the Message API: offline nodes are unavailable; a reply cut by the deadline or
# by over-commit never becomes available to the server.
ERROR_CODES = {"dropped": ErrorCode.NODE_UNAVAILABLE, "late": ErrorCode.REPLY_MESSAGE_UNAVAILABLE,
               "surplus": ErrorCode.REPLY_MESSAGE_UNAVAILABLE}
SERVER_IDENTITY = {"task_id": 1, "run_id": 1, "node_id": SUPERLINK_NODE_ID}  # as Flower's legacy start_grid sets it
WHY = {"dropped": "went offline before its upload ended", "late": "missed the round's deadline",
       "surplus": "arrived after the round had its updates (over-commit)"}


@dataclass(frozen=True)
class Sent:
    """What the strategy sent one device: the terms of its task and the handle its reply answers."""

    config: dict
    handle: Any             # the Message (Message API) or ClientProxy (legacy) the reply goes with
    other_arrays: bool      # sent arrays other than the global model (the adapter refuses: our downlink has one)


def to_numpy(params: Params) -> dict[str, np.ndarray]:
    return {n: p.detach().cpu().numpy() for n, p in params.items()}


@contextmanager
def flower_call(seed: int, what: str) -> Iterator[None]:
    """Around a call into Flower (`what`, for the message): its global random generators seeded with `seed`, its
    log quiet (INFO lines every round; warnings about its own ServerApp set-up, e.g. no fit_metrics_aggregation_fn),
    and the task identity of a ServerApp process (Messages read it) set where none is, all restored after; a
    strategy that stops its app (Flower's AppExitException: replies it cannot aggregate, a privacy budget spent)
    stops the run in one line."""
    python, legacy, flwr_log = random.getstate(), np.random.get_state(), logging.getLogger("flwr")
    level, identity = flwr_log.level, {k: getattr(TaskIdentity, f"_{k}") for k in SERVER_IDENTITY}
    for k, value in SERVER_IDENTITY.items():
        setattr(TaskIdentity, k, value if identity[k] is None else identity[k])
    random.seed(seed)
    np.random.seed(seed)
    flwr_log.setLevel(logging.ERROR)
    try:
        yield
    except AppExitException as err:
        raise TestbedError(f"algorithm.strategy: {what} stopped ({type(err).__name__}: {err})") from None
    finally:
        random.setstate(python)
        np.random.set_state(legacy)
        flwr_log.setLevel(level)
        for k, value in identity.items():
            setattr(TaskIdentity, f"_{k}", value)


def construct(cls: type, options: dict, reference: str):
    """cls(**options), a constructor's refusal as one line."""
    try:
        return cls(**options)
    except Exception as err:  # noqa: BLE001 - whatever the constructor raises, the fix is in the options
        raise TestbedError(f"algorithm.options: {reference} refused them ({type(err).__name__}: {err}); "
                           "correct algorithm.options") from None


def _refuse(what: str):
    raise TestbedError(f"algorithm.strategy: the strategy called {what}; the testbed sends the round's work and "
                       "collects its replies itself (only configure and aggregate are Flower's)")


def is_message_api(cls: type) -> bool:
    return issubclass(cls, MessageStrategy)


def minimum_nodes(strategy) -> int:
    """The nodes a Flower strategy waits for before it samples (its min_available_nodes / min_train_nodes, or the
    legacy min_available_clients / min_fit_clients); 0 where it declares none."""
    names = ("min_available_nodes", "min_train_nodes", "min_available_clients", "min_fit_clients")
    return max([int(getattr(strategy, n, 0) or 0) for n in names])


class CohortGrid(Grid):
    """The round's cohort as a Flower Grid: its node ids are the device ids; it never waits, sends or pulls."""

    def __init__(self, cohort: list[int]):
        self.cohort = cohort

    def get_node_ids(self) -> Iterable[int]:
        return list(self.cohort)

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def set_run(self, run) -> None:
        _refuse("Grid.set_run")

    @property
    def run(self):
        return _refuse("Grid.run")

    def push_messages(self, messages):
        _refuse("Grid.push_messages")

    def pull_messages(self, message_ids):
        _refuse("Grid.pull_messages")

    def send_and_receive(self, messages, *, timeout=None):
        _refuse("Grid.send_and_receive")


class MessageAPI:
    """A flwr.serverapp.strategy.Strategy, round by round."""

    def __init__(self, cls: type, options: dict, reference: str, params: Params):
        self.strategy, self.reference = construct(cls, options, reference), reference
        self.minimum = minimum_nodes(self.strategy)

    def configure(self, round: int, params: Params, cohort: list[int]) -> dict[int, Sent]:
        if len(cohort) < self.minimum:  # Flower would wait for more nodes to connect: nobody trains
            return {}
        arrays = ArrayRecord(dict(params))
        messages = self.strategy.configure_train(round, arrays, ConfigRecord(), CohortGrid(cohort))
        sent = {}
        for message in messages:
            content = message.content
            config = {k: v for record in content.config_records.values() for k, v in record.items()}
            other = any(r is not arrays and not _same(r, arrays) for r in content.array_records.values())
            sent[int(message.metadata.dst_node_id)] = Sent(config, message, other)
        return sent

    def aggregate(self, round: int, params: Params, replies: list[tuple[Sent, Arrival, Params]],
                  failures: list[tuple[Sent, Failure]]) -> dict[str, np.ndarray] | None:
        messages = [Message(RecordDict({"arrays": ArrayRecord(dict(trained)),
                                        "metrics": MetricRecord(_metrics(arrival))}), reply_to=sent.handle)
                    for sent, arrival, trained in replies]
        messages += [Message(Error(ERROR_CODES[f.reason], f"device {f.device} {WHY[f.reason]}"), reply_to=sent.handle)
                     for sent, f in failures]
        arrays, _ = self.strategy.aggregate_train(round, messages)
        return None if arrays is None else {k: a.numpy() for k, a in arrays.items()}


def _same(record: ArrayRecord, arrays: ArrayRecord) -> bool:
    return list(record) == list(arrays) and all(np.array_equal(record[k].numpy(), arrays[k].numpy()) for k in arrays)


def _metrics(arrival: Arrival) -> dict:
    """A reply's MetricRecord: "num-examples" (what Flower's strategies weight by) and the training metrics."""
    return {"num-examples": arrival.num_samples} | {k: float(v) for k, v in arrival.metrics.items()}


class DeviceProxy(ClientProxy):
    """A device as a legacy ClientProxy: its cid is the device id; the testbed trains it, so nothing is called."""

    def get_properties(self, ins, timeout, group_id):
        _refuse("ClientProxy.get_properties")

    def get_parameters(self, ins, timeout, group_id):
        _refuse("ClientProxy.get_parameters")

    def fit(self, ins, timeout, group_id):
        _refuse("ClientProxy.fit")

    def evaluate(self, ins, timeout, group_id):
        _refuse("ClientProxy.evaluate")

    def reconnect(self, ins, timeout, group_id):
        _refuse("ClientProxy.reconnect")


class CohortManager(SimpleClientManager):
    """The round's cohort as a legacy ClientManager: Flower's own sampling, but no waiting for clients (too few,
    and sampling fails: no client trains, as Flower's SimpleClientManager does after its wait)."""

    def __init__(self, cohort: list[int]):
        super().__init__()
        for d in cohort:
            self.register(DeviceProxy(str(d)))

    def wait_for(self, num_clients: int, timeout: int = 0) -> bool:
        return len(self) >= num_clients


class DeviceFailure(Exception):
    """A device's failure as the legacy API's aggregate_fit receives it (an entry of `failures`)."""

    def __init__(self, failure: Failure):
        super().__init__(f"device {failure.device} {WHY[failure.reason]}")
        self.device, self.reason = failure.device, failure.reason


class LegacyAPI:
    """A flwr.server.strategy.Strategy, round by round. A constructor that takes initial_parameters (FedOpt's
    require them) gets the testbed's initial model unless the options give them."""

    def __init__(self, cls: type, options: dict, reference: str, params: Params):
        if "initial_parameters" in inspect.signature(cls).parameters and "initial_parameters" not in options:
            options = {**options, "initial_parameters": _parameters(params)}
        self.strategy, self.reference = construct(cls, options, reference), reference
        self.minimum = minimum_nodes(self.strategy)
        self.strategy.initialize_parameters(CohortManager([]))  # as Flower's server does once (FedAvg frees them)

    def configure(self, round: int, params: Params, cohort: list[int]) -> dict[int, Sent]:
        parameters = _parameters(params)
        pairs = self.strategy.configure_fit(round, parameters, CohortManager(cohort))
        return {int(proxy.cid): Sent(dict(ins.config), proxy, ins.parameters != parameters) for proxy, ins in pairs}

    def aggregate(self, round: int, params: Params, replies: list[tuple[Sent, Arrival, Params]],
                  failures: list[tuple[Sent, Failure]]) -> dict[str, np.ndarray] | None:
        results = [(sent.handle, FitRes(Status(Code.OK, "Success"), _parameters(trained), arrival.num_samples,
                                        _metrics(arrival)))
                   for sent, arrival, trained in replies]
        new, _ = self.strategy.aggregate_fit(round, results, [DeviceFailure(f) for _, f in failures])
        if new is None:
            return None
        arrays = parameters_to_ndarrays(new)
        return dict(zip(params if len(arrays) == len(params) else map(str, range(len(arrays))), arrays))


def _parameters(params: Params):
    return ndarrays_to_parameters(list(to_numpy(params).values()))


def speaker_for(cls: type) -> type:
    return MessageAPI if is_message_api(cls) else LegacyAPI
