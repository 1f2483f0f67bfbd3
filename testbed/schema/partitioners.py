"""Which of Flower Datasets' partitioners a scenario may name (`data.partition: {kind: flwr, name, options}`), and
the options each takes, read off its signature: what the schema checks before any data is loaded. Imports
flwr_datasets where a name is looked up (it needs no torch), so the schema stays light.

Every refusal is a PartitionError naming the field below data.partition (`name`, `options`) and the fix, in one
line; testbed/data/flower_partition.py raises it too, for what only the data can tell.
"""
from __future__ import annotations

import inspect
from typing import Any

from testbed.schema.common import FieldError

INSTALL = 'pip install -e ".[hf]"'


class PartitionError(FieldError):
    """A refusal of `data.partition.<field>`, in one line."""


def partitioner_class(name: str) -> type:
    """The class `name` stands for: one of flwr_datasets.partitioner's, or user code 'package.module:Class'."""
    try:
        import flwr_datasets.partitioner as flower
    except ImportError:
        raise PartitionError("name", f"Flower's partitioners need the hf extra: {INSTALL}") from None
    if ":" in name:
        from testbed import plugins

        try:
            found = plugins.load(name)
        except plugins.BadReference as err:
            raise PartitionError("name", str(err)) from None
    else:
        found = getattr(flower, name, None)
    if not (isinstance(found, type) and issubclass(found, flower.Partitioner)) or found is flower.Partitioner:
        known = [n for n in flower.__all__ if n.endswith("Partitioner") and n != "Partitioner"]
        raise PartitionError("name", f"unknown partitioner '{name}'; choose one of flwr_datasets.partitioner's: "
                                     f"{', '.join(sorted(known))}; or name your own as 'package.module:Class'")
    return found


def parameters(cls: type) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(cls).parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def check(name: str, options: dict[str, Any]) -> None:
    """What the schema can check without data: the partitioner exists and takes these options."""
    takes = parameters(partitioner_class(name))
    unknown = sorted(set(options) - set(takes))
    if unknown:
        raise PartitionError("options", f"{', '.join(unknown)} is not an option of {name} (it takes: "
                                        f"{', '.join(takes)})")
