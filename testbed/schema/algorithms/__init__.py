"""The `algorithm:` section: one small config per algorithm, or a plugin's. Plain data: its options and what it
needs of the scenario; its Strategy is built by testbed/strategies.py (strategy_of), which reads the config with
what a Build holds: the local optimizer, the codecs, the submodel costs of the model (submodel methods) and the
run's length (P-UCBV's xi = R / (K eps)). The configs live by family (dense, submodels, adaptive, server_data,
flower); a name that is not a built-in's goes to PluginAlgorithm (plugin.py).

A section is read by its name's config alone: BUILTIN (builtin.py) names each built-in's config class by
reference, its family module is imported when a scenario names it and that config's validator built then, so that
validating a scenario does not build the other 45. The section stays a tagged union of the names: the errors'
locations (algorithm.fedprox.mu, shown as algorithm.mu) and a missing name's message are pydantic's own, as they
were with the configs themselves in the union; the JSON schema imports every family.
"""
from __future__ import annotations

from typing import Annotated, Union

from pydantic import Discriminator, SerializationInfo, Tag, ValidationInfo
from pydantic_core import core_schema

from testbed.schema.algorithms.builtin import BUILTIN
from testbed.schema.algorithms.config import AlgorithmConfig
from testbed.schema.algorithms.plugin import PluginAlgorithm

PLUGIN = "plugin"


def section_kind(section) -> str | None:
    """The union member that reads an `algorithm:` section: a built-in's by its name, else the plugin's (which
    resolves the name or says it is unknown); None without a name."""
    name = section.get("name") if isinstance(section, dict) else getattr(section, "name", None)
    if name is None:
        return None
    return name if isinstance(name, str) and name in BUILTIN else PLUGIN


class ReadByItsConfig:
    """The union's member for built-in `name`: the section validated by its config, and written out as the config
    it is (AlgorithmConfig has no fields); its JSON schema is the config's. A core schema of its own: pydantic's
    PlainValidator and SerializeAsAny, built 46 times, would cost the union four times as much."""

    def __init__(self, name: str):
        self.name = name

    def validate(self, section, info: ValidationInfo) -> AlgorithmConfig:
        """Its errors keep their locations below the member's tag (algorithm.fedprox.mu)."""
        return BUILTIN[self.name].model_validate(section, context=info.context)

    @staticmethod
    def serialize(config: AlgorithmConfig, info: SerializationInfo) -> dict:
        """Written out by the config's own serializer, through model_dump: that builds it where it was never built
        (defer_build), as in a sweep's worker, whose scenario arrived pickled; inferring it ("any") would not."""
        return config.model_dump(mode=info.mode, by_alias=info.by_alias, exclude_unset=info.exclude_unset,
                                 exclude_defaults=info.exclude_defaults, exclude_none=info.exclude_none,
                                 round_trip=info.round_trip)

    def __get_pydantic_core_schema__(self, source, handler):
        written = core_schema.plain_serializer_function_ser_schema(self.serialize, info_arg=True)
        return core_schema.with_info_plain_validator_function(self.validate, serialization=written)

    def __get_pydantic_json_schema__(self, schema, handler):
        return handler(BUILTIN[self.name].__pydantic_core_schema__)


Algorithm = Annotated[Union[tuple(Annotated[AlgorithmConfig, ReadByItsConfig(name), Tag(name)] for name in BUILTIN)
                            + (Annotated[PluginAlgorithm, Tag(PLUGIN)],)],
                      Discriminator(section_kind)]


def runs_async() -> list[str]:
    """The built-in algorithms an asynchronous protocol can run (their configs' ASYNC rules); an error message's,
    so it imports every family."""
    return sorted(name for name in BUILTIN if BUILTIN[name].ASYNC)


__all__ = ["Algorithm", "AlgorithmConfig", "BUILTIN", "PluginAlgorithm", "runs_async"]
