"""What every section of the scenario schema shares: strictness, registered names, paths relative to the file."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Callable

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, model_validator

from testbed import plugins

Fraction = Annotated[float, Field(ge=0, lt=1)]


class FieldError(ValueError):
    """A refusal in one line of the field `field` below a section (data.partition's `options`, data's
    `options.revision`), raised where the section's name is not known: the caller puts the section in front."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
Capability = Annotated[float, Field(gt=0, le=1)]


class Strict(BaseModel):
    # every number is finite; a class's validator is built where it is first used (a section inside the scenario's,
    # an algorithm's config where a scenario names it), not when its module is imported
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    @model_validator(mode="before")
    @classmethod
    def _default_kinds(cls, data):
        """A section written without `kind` whose keys all belong to its default's kind is that kind, so
        `--set algorithm.ratio.exploration=ucbv` tunes FedLPS's default P-UCBV instead of asking for the kind."""
        if not isinstance(data, dict):
            return data
        for name, field in cls.model_fields.items():
            value, default = data.get(name), field.default
            if (isinstance(value, dict) and "kind" not in value and isinstance(default, BaseModel)
                    and "kind" in type(default).model_fields and set(value) <= set(type(default).model_fields)):
                data = {**data, name: {"kind": default.kind, **value}}
        return data


def registered(kind: str, registry) -> type[str]:
    """A string that must name an entry of `registry`; the error lists the choices."""

    def check(name: str) -> str:
        if name not in registry:
            raise ValueError(f"unknown {kind} '{name}'; choose one of: {', '.join(sorted(registry))}")
        return name

    return Annotated[str, AfterValidator(check)]


def pluggable(kind: str, registry, check: Callable[[Any, str], None]) -> type[str]:
    """A built-in's name in `registry`, a short name an installed package registers, or user code named
    'package.module:attribute' (testbed/plugins.py); check(found, name) refuses user code not of this kind. A
    built-in is not looked up: it is the testbed's own, imported (with torch) only when a run needs it."""

    def valid(name: str) -> str:
        if name not in registry:
            check(plugins.resolve(kind, registry, name), name)
        return name

    return Annotated[str, AfterValidator(valid)]


def scenario_folder(info: ValidationInfo) -> Path:
    """The folder relative paths of the YAML start from: the scenario file's (the current one for a mapping)."""
    return Path((info.context or {}).get("base_dir", "."))


def relative_to_scenario(path: Path, info: ValidationInfo) -> Path:
    """A path from the YAML: absolute as given, relative to the scenario file's folder otherwise."""
    return path if path.is_absolute() else scenario_folder(info) / path




def existing_file(path: Path, info: ValidationInfo, what: str) -> Path:
    """The file a field names, resolved against the scenario's folder; refused where there is none."""
    resolved = relative_to_scenario(path, info)
    if not resolved.is_file():
        raise ValueError(f"no {what} at {resolved}; give a path relative to the scenario file")
    return resolved
