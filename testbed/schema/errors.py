"""Pydantic's validation errors worded for a scenario's author: 'field.path: what is wrong; how to fix it'."""
from __future__ import annotations

from difflib import get_close_matches
from typing import Literal, get_args, get_origin

from pydantic import BaseModel, Discriminator, ValidationError

from testbed.schema.common import Strict


def _schema_models(base: type[BaseModel] = Strict):
    for model in base.__subclasses__():
        yield model
        yield from _schema_models(model)


def tagged_unions() -> frozenset[str]:
    """Fields that hold a tagged union (availability, partition, algorithm, executor...), read off the schema's
    models imported so far: an algorithm's config is imported where a section names it (schema/algorithms)."""
    return frozenset(name for model in _schema_models() for name, f in model.model_fields.items()
                     if f.discriminator or any(isinstance(m, Discriminator) for m in f.metadata))


# What YAML 1.1 (PyYAML) reads as a boolean where a word was meant: `kind: off` is False, not 'off'
BOOLEAN_WORDS = {False: ("off, no and false", "off"), True: ("on, yes and true", "on")}
TEXT_EXPECTED = ("string_type", "literal_error", "union_tag_invalid")


def _models_in(annotation) -> list[type[BaseModel]]:
    """The schema models an annotation holds: itself, or those of its list, dict, optional or union."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in _models_in(arg)]


def _tag(model: type[BaseModel]):
    """The tag a member of a tagged union goes by: its kind, or an algorithm's name (the Literal it is declared
    as, else its default)."""
    field = model.model_fields.get("kind") or model.model_fields.get("name")
    if field is None:
        return None
    return get_args(field.annotation)[0] if get_origin(field.annotation) is Literal else field.default


def keys_at(root: str, path: tuple) -> list[str]:
    """The keys the mapping at `path` (a validation error's location, below the model named `root`) may hold,
    read off the schema: each part a field, a list index, or the tag of a union's member (the member itself,
    or the subclass that read the section: an algorithm's config, validated in AlgorithmConfig's place)."""
    models = [m for m in _schema_models() if m.__name__ == root]
    for part in path:
        if isinstance(part, int):
            continue
        inner = [m for model in models if part in model.model_fields
                 for m in _models_in(model.model_fields[part].annotation)]
        tagged = [m for model in models for m in (model, *_schema_models(model)) if _tag(m) == part]
        models = inner or tagged or models
    return sorted({key for model in models for key in model.model_fields})


def describe(err: ValidationError) -> str:
    """The first error as 'field.path: what is wrong; how to fix it' (+ how many more). An unknown key comes
    first: a misspelt key also leaves the key it misspells missing, which names the wrong one."""
    first = next((e for e in err.errors() if e["type"] == "extra_forbidden"), err.errors()[0])
    raw_loc = first["loc"]
    # pydantic puts a tagged union's tag into the path (availability.trace.file); the YAML has no such key
    unions = tagged_unions()
    loc = ".".join(str(p) for i, p in enumerate(raw_loc) if not (i and raw_loc[i - 1] in unions))
    kind, ctx = first["type"], first.get("ctx", {})
    if kind == "extra_forbidden":
        close = get_close_matches(str(raw_loc[-1]), keys_at(err.title, raw_loc[:-1]), n=1)
        message = "unknown key; remove it or correct its spelling" + (f": did you mean {close[0]!r}?" if close else "")
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
    value = first.get("input")
    if kind == "union_tag_invalid" and isinstance(value, dict):  # the tag's value, not the section's
        value = value.get(ctx["discriminator"].strip("'"))
    if isinstance(value, bool) and kind in TEXT_EXPECTED:
        words, example = BOOLEAN_WORDS[value]
        message += f"; YAML reads {words} as the boolean {value}: quote the word, e.g. '{example}'"
    more = len(err.errors()) - 1
    # a section's own check may name the field under it already ("data.options.dataset: ..."): said once
    text = f"{loc}: {message}" if loc and not message.startswith(f"{loc}.") else message
    return text + (f" (and {more} more)" if more else "")
