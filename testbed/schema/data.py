"""The data, model and training sections of the scenario: what each device learns, from what, and how."""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (Field, NonNegativeFloat, PositiveFloat, PositiveInt, ValidationInfo, field_validator,
                      model_validator)

from testbed.names import CODECS, DATASET_PARAMETERS, DATASETS, MODELS
from testbed import plugins
from testbed.schema.common import Fraction, Strict, pluggable, registered, relative_to_scenario


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


class Flwr(Strict):
    """One of Flower Datasets' partitioners by class name (or 'package.module:Class'), with its keyword options;
    testbed/data/flower_partition.py. Needs the hf extra; checked here without data, on the data in the run."""

    kind: Literal["flwr"]
    name: str
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _known_partitioner(cls, name: str) -> str:
        from testbed.schema.partitioners import partitioner_class

        partitioner_class(name)   # a PartitionError is a ValueError: pydantic puts the field in front
        return name

    @field_validator("options")
    @classmethod
    def _partitioner_takes_these(cls, options: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        from testbed.schema.partitioners import check

        if "name" in info.data:   # else the name was refused already
            check(info.data["name"], options)
        return options


Partition = Annotated[Union[IID, Dirichlet, Shards, Natural, Flwr], Field(discriminator="kind")]


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


def _dataset_loader(found, name: str) -> None:
    plugins.check_callable(found, name, None, "a dataset loader")


def _model_factory(found, name: str) -> None:
    plugins.check_callable(found, name, ("sample_shape", "num_classes", "width"), "a model factory")


class Data(Strict):
    name: pluggable("dataset", DATASETS, _dataset_loader)   # a bundled, on-disk or Hub (hf) dataset, or a loader of yours
    root: Path | None = None                        # folder of an on-disk dataset, relative to the scenario
    options: dict[str, Any] = Field(default_factory=dict)   # the loader's keyword options, e.g. split: letters
    partition: Partition = IID()
    min_samples_per_client: PositiveInt = 1
    client_split: ClientSplit = ClientSplit()
    server: ServerData | None = None

    @model_validator(mode="before")
    @classmethod
    def _settle_hub_data(cls, data: Any, info: ValidationInfo) -> Any:
        """An `hf` dataset's revision resolved and its partitioner moved to data.partition (schema/hub.py)."""
        if isinstance(data, dict) and data.get("name") == "hf":
            from testbed.schema.hub import settle

            return settle(data, info)
        return data

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
        parameters = self._loader_parameters()
        if self.root is None and parameters.get("root"):
            raise ValueError(f"dataset '{self.name}' is read from disk; set data.root to the folder of its files")
        if self.root is not None and "root" not in parameters:
            raise ValueError(f"dataset '{self.name}' ships with the testbed; remove data.root")
        unknown = sorted(set(self.options) - set(parameters) - {"root"})
        if unknown:
            takes = ", ".join(p for p in parameters if p != "root") or "none"
            raise ValueError(f"data.options: {', '.join(unknown)} is not an option of dataset '{self.name}' "
                             f"(it takes: {takes})")
        return self

    def _loader_parameters(self) -> dict[str, bool]:
        """What the loader takes by name, each with whether it must be given: a built-in's from its table in
        testbed/names.py (not imported before the run), user code's from its signature."""
        if self.name in DATASET_PARAMETERS:
            return {p: p == "root" for p in DATASET_PARAMETERS[self.name]}
        parameters = inspect.signature(self.loader()).parameters
        return {n: p.default is inspect.Parameter.empty for n, p in parameters.items()}

    def loader(self):
        return plugins.resolve("dataset", DATASETS, self.name)


class Model(Strict):
    name: pluggable("model", MODELS, _model_factory)   # a model of the zoo, or a factory of yours
    width: PositiveFloat = 1.0


class Client(Strict):
    """Local training on every device: minibatch SGD."""

    lr: PositiveFloat
    local_epochs: PositiveInt = 1
    batch_size: PositiveInt = 10
    local_steps: PositiveInt | None = None   # exactly this many minibatches instead of local_epochs passes
    momentum: Fraction = 0.0
    weight_decay: NonNegativeFloat = 0.0
    clip_norm: PositiveFloat | None = None   # each step's gradients clipped to this global L2 norm (off: None)


class Codec(Strict):
    down: registered("codec", CODECS) = "fp32"
    up: registered("codec", CODECS) = "fp32"

