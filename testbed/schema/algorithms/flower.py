"""`algorithm: {name: flower, strategy: "package.module:Class", options: {...}}`: a Flower server strategy,
unchanged, on the simulated fleet (testbed/algorithms/flower.py says how a round maps onto it).

Validated before any run: the reference imports, names a Flower strategy class of either API (the Message API's
flwr.serverapp.strategy.Strategy or the legacy flwr.server.strategy.Strategy), and its constructor takes
`options` (inspect.signature); each failure is one line naming algorithm.strategy or algorithm.options and the
fix. Flower is imported only when a scenario names it, so the testbed runs without Flower installed (the
`flower` extra installs it). Synchronous rounds only: it has no ASYNC rules, so asynchronous protocols refuse it.
"""
from __future__ import annotations

import importlib
import inspect
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_serializer

from testbed import plugins
from testbed.schema.algorithms.config import AlgorithmConfig

INSTALL = "pip install flwr (or the testbed's extra: pip install 'fl-edge-testbed[flower]')"
SUPPLIED = {"initial_parameters"}  # what the adapter passes a legacy constructor itself: the initial model


def resolve(reference: str) -> Any:
    """The attribute a "package.module:attribute" reference names (testbed/plugins.py); ValueError in one line
    where it cannot, with how to install Flower where that is what is missing."""
    try:
        return plugins.load(reference)
    except plugins.BadReference:
        if reference.partition(":")[0].partition(".")[0] == "flwr" and not _flower_installed():
            raise ValueError(f"cannot import {reference.partition(':')[0]}: Flower is not installed; "
                             f"{INSTALL}") from None
        raise


def _flower_installed() -> bool:
    try:
        importlib.import_module("flwr")
    except ImportError:
        return False
    return True


def flower_strategy_class(reference: str) -> type:
    """The Flower strategy class `reference` names; ValueError in one line where it names something else."""
    cls = resolve(reference)
    from flwr.server.strategy import Strategy as LegacyStrategy
    from flwr.serverapp.strategy import Strategy as MessageStrategy

    if not (isinstance(cls, type) and issubclass(cls, (MessageStrategy, LegacyStrategy))):
        raise ValueError(f"{reference} is not a Flower strategy class (a subclass of flwr.serverapp.strategy."
                         "Strategy or flwr.server.strategy.Strategy); name one, e.g. flwr.serverapp.strategy:FedAvg")
    if inspect.isabstract(cls):
        raise ValueError(f"{reference} is abstract ({', '.join(sorted(cls.__abstractmethods__))} not defined); "
                         "name a concrete strategy, e.g. flwr.serverapp.strategy:FedAvg")
    return cls


class FlowerConfig(AlgorithmConfig):
    name: Literal["flower"]
    # the YAML's `strategy`, named `reference` here: elsewhere in the code a strategy is the Strategy object
    reference: str = Field("flwr.serverapp.strategy:FedAvg", alias="strategy")
    options: dict[str, Any] = Field(default_factory=dict)   # the Flower strategy's constructor arguments

    @model_serializer(mode="wrap")
    def _as_written(self, handler):
        """Dumped (scenario.resolved.yaml) with the key the YAML uses."""
        return {"strategy" if k == "reference" else k: v for k, v in handler(self).items()}

    @field_validator("reference")
    @classmethod
    def _is_flower_strategy(cls, reference: str) -> str:
        flower_strategy_class(reference)
        return reference

    @field_validator("options")
    @classmethod
    def _taken_by_constructor(cls, options: dict, info: ValidationInfo) -> dict:
        if "reference" not in info.data:  # the reference was refused already
            return options
        flower = flower_strategy_class(info.data["reference"])
        signature = inspect.signature(flower)
        supplied = {n: None for n in SUPPLIED if n in signature.parameters and n not in options}
        try:
            signature.bind(**options, **supplied)
        except TypeError as err:
            takes = ", ".join(n for n, p in signature.parameters.items() if p.kind is p.KEYWORD_ONLY
                              or p.kind is p.POSITIONAL_OR_KEYWORD)
            raise ValueError(f"{flower.__name__} does not take these options ({err}); it takes: {takes}") from None
        return options
