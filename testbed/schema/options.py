"""Options of user code, checked before the run: `algorithm.options` and `selection.options` name the keyword
arguments of a class's constructor (or of a strategy's create), and each value must fit its annotated type."""
from __future__ import annotations

import inspect
import typing
from typing import Any

from pydantic import TypeAdapter, ValidationError


def parameters(creator: Any, skip: set[str]) -> dict[str, inspect.Parameter]:
    """What `creator` takes by name, less `skip`."""
    return {n: p for n, p in inspect.signature(creator).parameters.items() if n not in skip
            and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}


def annotated_types(creator: Any) -> dict[str, Any]:
    """The annotated types of creator's parameters, where they resolve (a dataclass's fields, a function's)."""
    try:
        return typing.get_type_hints(creator)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve is not checked
        return {}


def check_options(section: str, name: str, takes: dict[str, inspect.Parameter], types: dict[str, Any],
                  options: dict[str, Any]) -> None:
    """Refuse, in one line naming `section`.options, an option `name` does not take, one it needs that is
    missing, and a value that does not fit its annotated type."""
    unknown = sorted(set(options) - set(takes))
    if unknown:
        raise ValueError(f"{section}.options: {', '.join(unknown)} is not an option of '{name}' "
                         f"(it takes: {', '.join(takes) or 'none'})")
    missing = [n for n, p in takes.items() if p.default is inspect.Parameter.empty and n not in options]
    if missing:
        raise ValueError(f"{section}.options: '{name}' needs {', '.join(missing)}; add them to {section}.options")
    for option, value in options.items():
        if option in types:
            try:
                TypeAdapter(types[option]).validate_python(value)
            except ValidationError as err:
                raise ValueError(f"{section}.options.{option}: {err.errors()[0]['msg']} (got {value!r})") from None
