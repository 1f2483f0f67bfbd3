"""The scenario schema (pydantic, unknown keys refused, units in field names), loading, and build().

`load(path, overrides)` reads YAML, applies `--set a.b=value` overrides and validates; every problem becomes a
one-line TestbedError naming the file, the field path and the fix. `build(scenario)` turns a valid scenario
into live objects (dataset, partition, model, fleet, strategy, executor) through plain dict registries.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import numpy as np
import torch
import yaml
from pydantic import (BaseModel, Field, NonNegativeFloat, NonNegativeInt, PositiveFloat,
                      PositiveInt, ValidationError, ValidationInfo, field_validator, model_validator)

import devices
from testbed.data import DATASETS, PARTITIONERS, Dataset
from testbed.data.clients import ClientData, assign
from testbed.data.partition import label_histograms
from testbed.data.server import SharedData, carve, share_with_devices
from testbed.errors import TestbedError
from testbed.execution import EXECUTORS
from testbed.local import LocalSGD
from testbed.models import MODELS
from testbed.payload import CODECS
from testbed.schema.algorithms import Algorithm, Build, runs_async
from testbed.schema.common import Fraction, Strict, registered, relative_to_scenario
from testbed.schema.fleet import Fleet, Server
from testbed.schema.protocol import Protocol, SyncProtocol
from testbed.schema.resources import Resources
from testbed.submodel import SubmodelCosts

# ---- data, model, training -----------------------------------------------------------------------------
class IID(Strict):
    kind: Literal["iid"] = "iid"


class Dirichlet(Strict):
    kind: Literal["dirichlet"]
    alpha: PositiveFloat


class Shards(Strict):
    kind: Literal["shards"]
    classes_per_client: PositiveInt


class Natural(Strict):
    """The dataset's own clients: writers, speaking roles, users."""

    kind: Literal["natural"]


Partition = Annotated[Union[IID, Dirichlet, Shards, Natural], Field(discriminator="kind")]


class ClientSplit(Strict):
    """Held out of each device's own samples, for personalized evaluation."""

    validation_fraction: Fraction = 0.0
    test_fraction: Fraction = 0.0

    @model_validator(mode="after")
    def _leaves_training_data(self):
        if self.validation_fraction + self.test_fraction >= 1:
            raise ValueError("validation_fraction + test_fraction must stay below 1: devices need training data")
        return self


class ServerData(Strict):
    """A labelled dataset on the server, carved from the training pool before the devices are partitioned
    (FedDUMAP, Data-sharing, Hybrid-FL): `fraction` of the device data, in equal counts over `classes` random
    classes (the paper's default: 5 of 10, non-IID degree 0.31)."""

    fraction: Annotated[float, Field(gt=0, le=1)] = 0.1
    classes: PositiveInt = 5


class Data(Strict):
    name: registered("dataset", DATASETS)
    root: Path | None = None                        # folder of an on-disk dataset, relative to the scenario
    options: dict[str, Any] = Field(default_factory=dict)   # the loader's keyword options, e.g. split: letters
    partition: Partition = IID()
    min_samples_per_client: PositiveInt = 1
    client_split: ClientSplit = ClientSplit()
    server: ServerData | None = None

    @field_validator("root")
    @classmethod
    def _folder_exists(cls, root: Path | None, info: ValidationInfo) -> Path | None:
        if root is None:
            return None
        resolved = relative_to_scenario(root, info)
        if not resolved.is_dir():
            raise ValueError(f"no folder at {resolved}; give the folder that holds the dataset's files, "
                             "relative to the scenario file")
        return resolved

    @model_validator(mode="after")
    def _loader_takes_these(self):
        parameters = inspect.signature(DATASETS[self.name]).parameters
        root = parameters.get("root")
        if self.root is None and root is not None and root.default is inspect.Parameter.empty:
            raise ValueError(f"dataset '{self.name}' is read from disk; set data.root to the folder of its files")
        if self.root is not None and root is None:
            raise ValueError(f"dataset '{self.name}' ships with the testbed; remove data.root")
        unknown = sorted(set(self.options) - set(parameters) - {"root"})
        if unknown:
            takes = ", ".join(p for p in parameters if p != "root") or "none"
            raise ValueError(f"data.options: {', '.join(unknown)} is not an option of dataset '{self.name}' "
                             f"(it takes: {takes})")
        return self

    def load(self) -> Dataset:
        where = {"root": self.root} if self.root is not None else {}
        try:
            return DATASETS[self.name](**where, **self.options)
        except (OSError, ValueError) as err:  # a file problem names its path; anything else is an option's value
            about_files = isinstance(err, OSError) or (self.root is not None and str(self.root) in str(err))
            raise TestbedError(f"data.{'root' if about_files else 'options'}: {err}") from None


class Model(Strict):
    name: registered("model", MODELS)
    width: PositiveFloat = 1.0


class Client(Strict):
    """Local training on every device: minibatch SGD."""

    lr: PositiveFloat
    local_epochs: PositiveInt = 1
    batch_size: PositiveInt = 10
    local_steps: PositiveInt | None = None   # exactly this many minibatches instead of local_epochs passes
    momentum: Fraction = 0.0
    weight_decay: NonNegativeFloat = 0.0


class Codec(Strict):
    down: registered("codec", CODECS) = "fp32"
    up: registered("codec", CODECS) = "fp32"


# ---- the run ------------------------------------------------------------------------------------------
class Round(Strict):
    clients_per_round: PositiveInt            # K: updates the server waits for
    overcommit: float = Field(1.0, ge=1.0)    # select ceil(overcommit * K), keep the first K arrivals
    deadline_s: PositiveFloat | None = None   # cut the round this long after it starts

    @property
    def n_select(self) -> int:
        return math.ceil(self.overcommit * self.clients_per_round - 1e-9)


class Stop(Strict):
    max_rounds: PositiveInt = 100
    max_sim_time_s: PositiveFloat | None = None      # no round starts after this simulated time
    target_accuracy: float | None = Field(None, gt=0, le=1)
    stop_at_target: bool = False


class Eval(Strict):
    every_rounds: PositiveInt = 1
    every_s: PositiveFloat | None = None     # instead: the first round (aggregation) ending past each multiple
    max_samples: PositiveInt | None = None   # score on a fixed random subset of the test set (a slow model)


class Checkpointing(Strict):
    """How often the run folder gets a checkpoint that `testbed run --resume` goes on from."""

    every_rounds: PositiveInt = 5   # and after the last round


class DeviceState(Strict):
    """Where the server keeps what devices keep between rounds (moments, scores, personal models)."""

    max_in_memory: PositiveInt | None = None  # devices held in memory, least recently used first to disk


class TrainingDevice(Strict):
    device: Literal["cpu", "cuda"] = "cpu"   # where clients train (testbed/execution/device.py)
    threads: PositiveInt | None = None      # torch threads of the run, wherever it runs (testbed/execution/threads.py)


class SerialExecutor(TrainingDevice):
    """One client after another: the reference."""

    kind: Literal["serial"] = "serial"


class BatchedExecutor(TrainingDevice):
    """A round's clients trained together with torch.func.vmap."""

    kind: Literal["batched"]
    max_clients: PositiveInt | None = None   # clients per vmapped group (memory); all of the round by default


class RayExecutor(TrainingDevice):
    """Batches of clients shipped to Ray workers (the `ray` extra)."""

    kind: Literal["ray"]
    workers: PositiveInt = 2
    address: str | None = None               # a running cluster ('auto', 'ray://host:10001'); none: start locally


Executor = Annotated[Union[SerialExecutor, BatchedExecutor, RayExecutor], Field(discriminator="kind")]


class Scenario(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")   # becomes a folder name
    description: str = ""
    seed: NonNegativeInt = 0
    data: Data
    model: Model
    fleet: Fleet
    server: Server = Server()
    protocol: Protocol = SyncProtocol()
    round: Round | None = None                # synchronous rounds; an asynchronous protocol does not use it
    client: Client
    algorithm: Algorithm
    codec: Codec = Codec()
    stop: Stop = Stop()
    eval: Eval = Eval()
    device_state: DeviceState = DeviceState()
    checkpoint: Checkpointing = Checkpointing()
    executor: Executor = SerialExecutor()
    resources: Resources = Resources()

    @property
    def batteries_on(self) -> bool:
        return any(g.battery for g in self.fleet.groups)

    @property
    def energy_on(self) -> bool:
        """Energy is accounted when asked for, or where a battery needs it."""
        return self.resources.energy or self.batteries_on

    @property
    def memory_on(self) -> bool:
        """Memory limits hold when asked for, or where a group sets its devices' memory."""
        return self.resources.memory or any(g.memory_MB is not None for g in self.fleet.groups)

    @property
    def updates_per_aggregation(self) -> int:
        """K: the updates a round waits for (sync), or the buffer (async; the concurrency where only a period
        triggers aggregation)."""
        if self.protocol.kind == "sync":
            return self.round.clients_per_round
        return self.protocol.buffer_size or self.protocol.concurrency

    @model_validator(mode="after")
    def _local_steps_where_counted(self):
        if getattr(self.algorithm, "NEEDS_LOCAL_STEPS", False) and self.client.local_steps is None:
            raise ValueError(f"client.local_steps: {self.algorithm.name} counts its local steps (FedLion's uplink "
                             "packs sums of E signs); set client.local_steps, e.g. 10")
        return self

    @model_validator(mode="after")
    def _server_data_where_used(self):
        if getattr(self.algorithm, "NEEDS_SERVER_DATA", False) and self.data.server is None:
            raise ValueError(f"data.server: {self.algorithm.name} trains on the server's own data; add "
                             "data.server, e.g. {fraction: 0.1, classes: 5}")
        return self

    @model_validator(mode="after")
    def _protocol_fits(self):
        if self.protocol.kind == "sync":
            if self.round is None:
                raise ValueError("round: required for synchronous rounds; add round: {clients_per_round: 10}")
            return self
        if self.resources.idle_energy:
            raise ValueError("resources.idle_energy: an asynchronous device never waits for a round to close, so it "
                             "has no idle phase; remove idle_energy")
        if self.protocol.concurrency > self.fleet.size:
            raise ValueError(f"protocol.concurrency: {self.protocol.concurrency} is more than the fleet's "
                             f"{self.fleet.size} devices; lower it or add devices to fleet.groups")
        rules = getattr(self.algorithm, "ASYNC", frozenset())
        if "buffered" not in rules:
            runs = ", ".join(runs_async())
            raise ValueError(f"protocol: {self.algorithm.name} cannot run asynchronously (its server step needs a "
                             f"round's participants together); use protocol kind sync, or one of: {runs}")
        if self.protocol.mixing is not None and "mixing" not in rules:
            raise ValueError(f"protocol.mixing: FedAsync's mixture needs a server that adds the update as it is "
                             f"(fedavg, fedprox), not {self.algorithm.name}'s; remove mixing to run FedBuff")
        return self

    @model_validator(mode="after")
    def _k_fits_fleet(self):
        if self.round is None:
            return self
        if self.round.clients_per_round > self.fleet.size:
            raise ValueError(f"round.clients_per_round: {self.round.clients_per_round} is more than the fleet's "
                             f"{self.fleet.size} devices; lower it or add devices to fleet.groups")
        return self


# ---- loading ------------------------------------------------------------------------------------------
def read_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise TestbedError(f"{path}: no such scenario file")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise TestbedError(f"{path}: not UTF-8 text (byte {err.start}); save the scenario as UTF-8 YAML") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise TestbedError(f"{path}{where}: not valid YAML ({getattr(err, 'problem', err)})") from None
    if not isinstance(raw, dict):
        raise TestbedError(f"{path}: a scenario is a YAML mapping (name:, data:, model:, fleet:, ...)")
    return raw


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """`a.b.c=value` sets raw['a']['b']['c'] = YAML-parsed value; a number indexes a list (fleet.groups.0.count)."""
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise TestbedError(f"--set {item}: expected KEY.PATH=VALUE, e.g. --set stop.max_rounds=5")
        set_path(raw, key, yaml_value(value, f"--set {item}"), f"--set {item}")
    return raw


def yaml_value(text: str, origin: str):
    """A --set or --grid value, parsed as YAML; what YAML cannot read is named in one line."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise TestbedError(f"{origin}: not a YAML value ({getattr(err, 'problem', None) or err}); quote it, "
                           "e.g. --set name='a b'") from None


def set_path(raw: dict, key: str, value, origin: str) -> None:
    """raw[a][b][c] = value for key "a.b.c", creating sections; `origin` (the option) starts the errors."""
    *parents, leaf = key.split(".")
    node = raw
    for part in parents:
        slot = _slot(node, part, origin)
        if isinstance(node, dict):
            node.setdefault(slot, {})
        node = node[slot]
    node[_slot(node, leaf, origin)] = value


def _slot(node, part: str, origin: str) -> str | int:
    """The key, or list index, that `part` names in `node`."""
    if isinstance(node, dict):
        return part
    if isinstance(node, list):
        if part.isdigit() and int(part) < len(node):
            return int(part)
        raise TestbedError(f"{origin}: '{part}' is not an index of this {len(node)}-item list")
    raise TestbedError(f"{origin}: the value before '{part}' is not a section")


def validate(raw: dict, source: str = "scenario", base_dir: Path = Path(".")) -> Scenario:
    try:
        return Scenario.model_validate(raw, context={"base_dir": base_dir})
    except ValidationError as err:
        raise TestbedError(f"{source}: {describe(err)}") from None


def load(path: str | Path, overrides: list[str] = ()) -> Scenario:
    raw = apply_overrides(read_yaml(path), list(overrides))
    return validate(raw, str(path), Path(path).parent)


def _schema_models(base: type[BaseModel] = Strict):
    for model in base.__subclasses__():
        yield model
        yield from _schema_models(model)


# Fields that hold a tagged union (availability, partition, algorithm, executor...), read off the schema
TAGGED_UNIONS = {name for model in _schema_models() for name, f in model.model_fields.items() if f.discriminator}


def describe(err: ValidationError) -> str:
    """The first error as 'field.path: what is wrong; how to fix it' (+ how many more)."""
    first = err.errors()[0]
    raw_loc = first["loc"]
    # pydantic puts a tagged union's tag into the path (availability.trace.file); the YAML has no such key
    loc = ".".join(str(p) for i, p in enumerate(raw_loc) if not (i and raw_loc[i - 1] in TAGGED_UNIONS))
    kind, ctx = first["type"], first.get("ctx", {})
    if kind == "extra_forbidden":
        message = "unknown key; remove it or correct its spelling"
    elif kind == "union_tag_invalid":
        loc = f"{loc}.{ctx['discriminator'].strip(chr(39))}"
        message = f"unknown {ctx['tag']!r}; choose one of: {ctx['expected_tags']}"
    elif kind == "union_tag_not_found":
        loc = f"{loc}.{ctx['discriminator'].strip(chr(39))}"
        message = "missing; it selects the kind of this section"
    elif kind == "missing":
        message = "required; add it"
    else:
        message = first["msg"].removeprefix("Value error, ")
        if "input" in first and kind not in ("value_error",):
            message += f" (got {first['input']!r})"
    more = len(err.errors()) - 1
    text = f"{loc}: {message}" if loc else message
    return text + (f" (and {more} more)" if more else "")


# ---- build --------------------------------------------------------------------------------------------
class Purpose:
    """Independent random streams, one per purpose, spawned from the scenario seed."""

    FLEET, SELECTION, TRAINING, MODEL_INIT, PARTITION, CLIENT_SPLIT, EVALUATION, STRATEGY, SERVER_DATA = range(9)


def stream(seed: int, *key: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(seed, spawn_key=key)


@dataclass
class Experiment:
    scenario: Scenario
    dataset: Dataset
    clients: ClientData
    model: torch.nn.Module
    fleet: Any
    strategy: Any
    executor: Any
    shared: SharedData | None = None   # the server's own data (data.server)


def build(scenario: Scenario) -> Experiment:
    seed = scenario.seed
    dataset = scenario.data.load()
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
    try:
        parts = PARTITIONERS[partition.kind](labels[pool], fleet.n,
                                             np.random.default_rng(stream(seed, Purpose.PARTITION)),
                                             min_samples=scenario.data.min_samples_per_client, **params)
    except ValueError as err:
        raise TestbedError(f"data.partition: {err}") from None
    parts = [pool[p] for p in parts]  # back to indices of the training set
    split = scenario.data.client_split
    clients = assign(dataset, parts, np.random.default_rng(stream(seed, Purpose.CLIENT_SPLIT)),
                     split.validation_fraction, split.test_fraction, natural=partition.kind == "natural")
    shared = None if server is None else SharedData(
        dataset.train_x[torch.from_numpy(server)], dataset.train_y[torch.from_numpy(server)],
        np.bincount(labels[server], minlength=dataset.num_classes),
        label_histograms(labels, clients.train, dataset.num_classes), seed, dataset.train_x, dataset.train_y,
        tuple(clients.train))
    share_fraction = getattr(scenario.algorithm, "share_fraction", None)  # Data-sharing: devices get server samples
    if share_fraction is not None:
        count = round(share_fraction * int(clients.num_samples.sum()))
        clients = replace(clients, train=share_with_devices(
            clients.train, server, count, np.random.default_rng(stream(seed, Purpose.SERVER_DATA, 1))))
    torch.manual_seed(int(stream(seed, Purpose.MODEL_INIT).generate_state(1)[0]))
    model = MODELS[scenario.model.name](dataset.sample_shape, dataset.num_classes, scenario.model.width)
    client = LocalSGD(**scenario.client.model_dump())
    strategy = scenario.algorithm.strategy(Build(
        client, CODECS[scenario.codec.down], CODECS[scenario.codec.up], scenario.stop.max_rounds,
        scenario.updates_per_aggregation, fleet.n, SubmodelCosts(model, dataset.train_x[:1]), shared,
        lambda: initial_accuracy(model, dataset, clients)))
    # threads are the runner's to set (the whole run); a Ray executor passes them on to its workers
    options = scenario.executor.model_dump(exclude={"kind"} if scenario.executor.kind == "ray" else {"kind", "threads"})
    executor = EXECUTORS[scenario.executor.kind](model, dataset, **options)
    return Experiment(scenario, dataset, clients, model, fleet, strategy, executor, shared)


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
    from testbed.execution import score

    params = {n: p.detach() for n, p in model.named_parameters()}
    correct, _ = score(model, params, dataset.train_x, dataset.train_y)
    return np.array([correct[idx].mean() if len(idx) else 0.0 for idx in clients.train])
