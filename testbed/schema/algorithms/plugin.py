"""An algorithm of the user's: `algorithm: {name: "my_algos:FedNova", options: {...}}`, or a short name that an
installed package registers (testbed/plugins.py). The name must lead to a subclass of testbed's Strategy
(testbed/algorithms/base.py) that defines aggregate and keeps the hooks' signatures; `options` are the keyword
arguments of its `create` (by default its constructor, less the `client`, `down` and `up` the run fills in)."""
from __future__ import annotations

import inspect
from typing import Any

from pydantic import Field, field_validator, model_validator

from testbed import plugins
from testbed.names import INTERFACES
from testbed.schema.algorithms.builtin import BUILTIN
from testbed.schema.algorithms.config import AlgorithmConfig
from testbed.schema.options import annotated_types, check_options, parameters

FILLED_BY_THE_RUN = ("client", "down", "up")


class PluginAlgorithm(AlgorithmConfig):
    name: str
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _names_a_strategy(cls, name: str) -> str:
        found = plugins.resolve("algorithm", BUILTIN, name)   # user code: importing it imports torch anyway
        plugins.check_subclass(found, INTERFACES["algorithm"], name)
        return name

    @model_validator(mode="after")
    def _takes_these_options(self):
        takes = self._options_taken()
        if takes is not None:  # None: create(build, **options) checks them itself
            check_options("algorithm", self.name, takes, annotated_types(self._creator()[0]), self.options)
        return self

    def strategy_class(self) -> type:
        return plugins.resolve("algorithm", BUILTIN, self.name)

    def _creator(self) -> tuple[Any, bool]:
        """What takes the options: the strategy's own create, or (the default create) its constructor; and
        whether it is the constructor."""
        cls = self.strategy_class()
        default = cls.create.__func__ is INTERFACES["algorithm"].create.__func__
        return (cls if default else cls.create), default

    def _options_taken(self) -> dict[str, inspect.Parameter] | None:
        """The options the strategy's create takes by name (None: any, through **options)."""
        creator, default = self._creator()
        taken = inspect.signature(creator).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in taken.values()) and not default:
            return None
        skip = set(FILLED_BY_THE_RUN) if default else {next(iter(taken), None)}  # create's build argument
        return parameters(creator, skip)

    def asynchronous(self) -> frozenset[str]:
        return frozenset(self.strategy_class().ASYNC)

    def needs_local_steps(self) -> bool:
        return self.strategy_class().NEEDS_LOCAL_STEPS

    def needs_server_data(self) -> bool:
        return self.strategy_class().NEEDS_SERVER_DATA
