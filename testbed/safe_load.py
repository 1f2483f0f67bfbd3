"""Reading the testbed's own torch.save files (checkpoints, spilled device states) without running code from them.

A run folder may come from someone else, and an ordinary unpickler runs whatever a file tells it to. Files are
read with torch.load(weights_only=True), which builds tensors, numbers, strings and plain containers only, plus
an allow-list: the testbed's own classes that unpickling only fills with attributes (ServerState, Task, the codecs,
an async run's tasks in flight, the bandits' arms, rate models...) and numpy arrays, scalars and seeds. A file that
names anything else is refused in one line before a byte of it is unpickled.
"""
from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from testbed import migrations
from testbed.errors import TestbedError
from testbed.paths import user_path

NUMPY = {"numpy.ndarray", "numpy.dtype", "numpy._core.multiarray._reconstruct", "numpy._core.multiarray.scalar",
         "numpy.core.multiarray._reconstruct", "numpy.core.multiarray.scalar",
         "numpy.random.bit_generator.SeedSequence", "numpy.random.bit_generator.__pyx_unpickle_SeedSequence"}


def _allowed(name: str) -> Any | None:
    """The object a file's global `name` stands for, where it may be built: a class of the testbed's own (testbed,
    devices) that unpickling only fills with attributes, or one of numpy's array and seed pieces; None otherwise.
    Only those packages' modules are imported to check."""
    module, _, attribute = name.rpartition(".")
    if name in NUMPY or name.startswith("numpy.dtypes."):
        return getattr(importlib.import_module(module), attribute, None)
    if module.partition(".")[0] not in ("testbed", "devices"):
        return None
    try:
        value = getattr(importlib.import_module(module), attribute, None)
    except ImportError:
        return None
    return value if isinstance(value, type) and _rebuilt_by_attributes(value) else None


def _rebuilt_by_attributes(cls: type) -> bool:
    """Whether unpickling an instance only creates it and sets its attributes: a dataclass, or a class of ours
    that leaves pickling to object (an async run's tasks hold the fleet's rate models, devices.rates.Rates)."""
    methods = ("__reduce__", "__reduce_ex__", "__setstate__")
    return dataclasses.is_dataclass(cls) or all(getattr(cls, m, None) is getattr(object, m, None) for m in methods)


def load(path: Path, what: str, fix: str = "", map_location: str | None = None) -> Any:
    """torch.load of `path` (a `what`, for the messages, which end with `fix`) with weights_only=True and the
    allow-list above; map_location "cpu" reads a file a GPU run wrote onto the CPU (None: where it was)."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception as err:  # noqa: BLE001 - any unreadable file gets the same one-line answer
        raise TestbedError(f"{user_path(path)}: unreadable {what} ({type(err).__name__}){fix}") from None
    allowed = {name: _allowed(migrations.current_name(name)) for name in names}   # an older file's names too
    refused = sorted(name for name, value in allowed.items() if value is None)
    if refused:
        raise TestbedError(f"{user_path(path)}: the {what} holds Python objects a testbed {what} never does "
                           f"({refused[0]}); refused, since loading it could run code from the file{fix}")
    safe = [(value, name) for name, value in allowed.items()]   # each under the name the file gives it
    if any(name.startswith("numpy.") for name in names):  # an array's dtype is built through its DType class
        safe += [value for name, value in vars(np.dtypes).items() if name.endswith("DType")]
    try:
        with torch.serialization.safe_globals(safe):
            return torch.load(path, weights_only=True, map_location=map_location)
    except Exception as err:  # noqa: BLE001
        raise TestbedError(f"{user_path(path)}: unreadable {what} ({type(err).__name__}){fix}") from None
