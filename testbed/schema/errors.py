"""Pydantic's validation errors worded for a scenario's author: 'field.path: what is wrong; how to fix it'."""
from __future__ import annotations

from functools import cache

from pydantic import BaseModel, Discriminator, ValidationError

from testbed.schema.common import Strict


def _schema_models(base: type[BaseModel] = Strict):
    for model in base.__subclasses__():
        yield model
        yield from _schema_models(model)


@cache
def tagged_unions() -> frozenset[str]:
    """Fields that hold a tagged union (availability, partition, algorithm, executor...), read off the schema once
    every section is defined."""
    return frozenset(name for model in _schema_models() for name, f in model.model_fields.items()
                     if f.discriminator or any(isinstance(m, Discriminator) for m in f.metadata))


def describe(err: ValidationError) -> str:
    """The first error as 'field.path: what is wrong; how to fix it' (+ how many more)."""
    first = err.errors()[0]
    raw_loc = first["loc"]
    # pydantic puts a tagged union's tag into the path (availability.trace.file); the YAML has no such key
    loc = ".".join(str(p) for i, p in enumerate(raw_loc) if not (i and raw_loc[i - 1] in tagged_unions()))
    kind, ctx = first["type"], first.get("ctx", {})
    if kind == "extra_forbidden":
        message = "unknown key; remove it or correct its spelling"
    elif kind == "union_tag_invalid":
        loc = f"{loc}.{ctx['discriminator'].strip(chr(39))}"
        message = f"unknown {ctx['tag']!r}; choose one of: {ctx['expected_tags']}"
    elif kind == "union_tag_not_found":
        key = ctx["discriminator"].strip(chr(39))
        loc = f"{loc}.{'name' if key.endswith('()') else key}"  # the one function tag, algorithm's, reads its name
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
