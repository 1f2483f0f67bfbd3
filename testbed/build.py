"""The composition root: a validated scenario to the live objects of one run (testbed/experiment.py's
Experiment): dataset, partition, model, fleet, strategy, selector, staleness function and executor, each from its
own random stream spawned from the scenario's seed, and the contracts that check the plugins among them. The
schema (testbed/schema/) stays plain data and the protocols never import this module: what the sections name is
made here, through the module that knows each kind (testbed/data/loading.py, testbed/models/factory.py,
testbed/strategies.py, testbed/staleness.py; the selector by testbed/validation.py's selector_of, which asks it
what validation asks). check_builtins: hold the built-in plugins to their contracts too, as user code is (the
tests run every built-in through them; testbed/contracts.py)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

import devices
from testbed.data import PARTITIONERS, Dataset
from testbed.data.clients import ClientData, assign
from testbed.data.loading import load_dataset
from testbed.data.partition import label_histograms
from testbed.data.server import SharedData, carve, share_with_devices
from testbed.contracts import Contracts, check_model
from testbed.errors import TestbedError
from testbed.execution import EXECUTORS
from testbed.execution.placement import Placement
from testbed.execution.processes import ProcessExecutor, workers_for
from testbed.functional import score
from testbed.local import LocalSGD
from testbed.payload import CODECS
from testbed.algorithms.base import Build
from testbed.schema.scenario import Scenario
from testbed.strategies import strategy_of
from testbed.validation import selector_of
from testbed.experiment import Experiment, Purpose, stream
from testbed.models.factory import make_model
from testbed.staleness import staleness_of
from testbed.submodel import SubmodelCosts


def build(scenario: Scenario, *, check_builtins: bool = False) -> Experiment:
    seed = scenario.seed
    dataset = load_dataset(scenario.data)
    fleet = devices.Fleet.build(scenario.fleet.specs(), stream(seed, Purpose.FLEET))
    labels = dataset.train_y.numpy()
    server, pool = _server_data(scenario, labels, dataset.num_classes)
    partition = scenario.data.partition
    params = partition.model_dump(exclude={"kind"})
    if partition.kind == "natural":
        if dataset.train_clients is None:
            raise TestbedError(f"data.partition: dataset '{dataset.name}' has no natural clients; "
                               "use iid, dirichlet or shards")
        params["clients"] = dataset.train_clients[pool]
    if partition.kind == "flwr" and dataset.train_clients is not None:  # a partition_by other than the label
        params["clients"] = dataset.train_clients[pool]
    try:
        parts = PARTITIONERS[partition.kind](labels[pool], fleet.n,
                                             np.random.default_rng(stream(seed, Purpose.PARTITION)),
                                             min_samples=scenario.data.min_samples_per_client, **params)
    except ValueError as err:  # Flower's partitioners name the field below data.partition (PartitionError)
        field = getattr(err, "field", "")
        raise TestbedError(f"data.partition{'.' if field else ''}{field}: {err}") from None
    parts = [pool[p] for p in parts]  # back to indices of the training set
    split = scenario.data.client_split
    clients = assign(dataset, parts, np.random.default_rng(stream(seed, Purpose.CLIENT_SPLIT)),
                     split.validation_fraction, split.test_fraction, natural=_one_client_a_device(partition, params))
    shared = None if server is None else SharedData(
        dataset.train_x[torch.from_numpy(server)], dataset.train_y[torch.from_numpy(server)],
        np.bincount(labels[server], minlength=dataset.num_classes),
        label_histograms(labels, clients.train, dataset.num_classes), seed, dataset.train_x, dataset.train_y,
        tuple(clients.train))
    share_fraction = scenario.algorithm.server_share()  # Data-sharing: devices get server samples
    if share_fraction is not None:
        count = round(share_fraction * int(clients.num_samples.sum()))
        clients = replace(clients, train=share_with_devices(
            clients.train, server, count, np.random.default_rng(stream(seed, Purpose.SERVER_DATA, 1))))
    torch.manual_seed(int(stream(seed, Purpose.MODEL_INIT).generate_state(1)[0]))
    model = make_model(scenario.model.name, scenario.model.width, dataset.sample_shape, dataset.num_classes)
    check_model(scenario.model.name, model, dataset.train_x[:2], dataset.num_classes,   # logits for every class
                check_builtins)
    client = LocalSGD(**scenario.client.model_dump())
    strategy = strategy_of(scenario.algorithm, Build(
        client, CODECS[scenario.codec.down], CODECS[scenario.codec.up], scenario.stop.max_rounds,
        scenario.clients_per_round, fleet.n, SubmodelCosts(model, dataset.train_x[:1]), shared,
        lambda: initial_accuracy(model, dataset, clients)))
    executor = _executor(scenario, model, dataset)
    selector = selector_of(scenario)
    contracts = Contracts(scenario, strategy, selector, dict(model.named_parameters()), fleet.n,
                          Placement.of(scenario.executor, strategy).server, check_builtins)
    protocol = scenario.protocol
    weight = staleness_of(**protocol.staleness.model_dump()) if protocol.kind == "async" else None
    return Experiment(scenario, dataset, clients, model, fleet, strategy, executor, selector, contracts, weight,
                      shared)


def _one_client_a_device(partition, params: dict) -> bool:
    """Whether each device holds one natural client's samples (its local test set can be that client's test data):
    the natural partition, or Flower's NaturalIdPartitioner on the clients column."""
    return partition.kind == "natural" or (partition.kind == "flwr" and partition.name == "NaturalIdPartitioner"
                                           and "clients" in params)


def _executor(scenario: Scenario, model: torch.nn.Module, dataset: Dataset):
    """The scenario's executor, in worker processes where executor.workers asks for more than one."""
    kind = scenario.executor.kind
    if kind == "ray":  # threads are the runner's to set (the whole run); a Ray executor passes them on to its workers
        return EXECUTORS[kind](model, dataset, **scenario.executor.model_dump(exclude={"kind"}))
    options = scenario.executor.model_dump(exclude={"kind", "threads", "workers"})
    threads = scenario.executor.threads
    setting = 1 if scenario.executor.device == "cuda" else scenario.executor.workers  # workers train on the CPU
    workers = workers_for(setting, threads, scenario.clients_per_round)
    if workers == 1:
        return EXECUTORS[kind](model, dataset, **options)
    return ProcessExecutor(EXECUTORS[kind], model, dataset, workers, threads, **options)


def _server_data(scenario: Scenario, labels: np.ndarray, num_classes: int) -> tuple[np.ndarray | None, np.ndarray]:
    """The server's indices (None without data.server) and the pool of indices left for the devices."""
    wanted = scenario.data.server
    if wanted is None:
        return None, np.arange(len(labels))
    try:
        return carve(labels, num_classes, wanted.fraction, wanted.classes,
                     np.random.default_rng(stream(scenario.seed, Purpose.SERVER_DATA)))
    except ValueError as err:
        raise TestbedError(f"data.server.{err}") from None


def initial_accuracy(model: torch.nn.Module, dataset: Dataset, clients: ClientData) -> np.ndarray:
    """(n,) each device's accuracy of the initial model on its own training data (P-UCBV's a_k^{-1}): one forward
    pass over the training set before round 1, at no simulated cost (the paper charges nothing for it either)."""
    params = {n: p.detach() for n, p in model.named_parameters()}
    correct, _ = score(model, params, dataset.train_x, dataset.train_y)
    return np.array([correct[idx].mean() if len(idx) else 0.0 for idx in clients.train])
