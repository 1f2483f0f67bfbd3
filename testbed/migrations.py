"""Reading checkpoints that an older testbed wrote: every difference between what it wrote and what this one
writes, in one place, each with why it is still read. A run folder outlives the code that made it (a crash, a
long study resumed after an upgrade), so a resume must go on from it or refuse in one line; nothing here is used
by a fresh run.

Each entry takes plain values and the current class to build, so this module imports nothing of the layers that
define them (README, "Layout").
"""
from __future__ import annotations

import dataclasses
from typing import Any

from testbed.errors import TestbedError

# Classes a checkpoint names by where they used to live: an asynchronous run's tasks in flight and its window were
# pickled under the protocol's own module before its state moved to async_state.py. The file's name -> where the
# class lives now; safe_load.py reads the file's global under its old name, as the class it names now.
MOVED = {
    "testbed.protocols.asynchronous.InFlight": "testbed.protocols.async_state.InFlight",
    "testbed.protocols.asynchronous.Window": "testbed.protocols.async_state.Window",
}


def current_name(name: str) -> str:
    """Where a global a checkpoint names lives now."""
    return MOVED.get(name, name)


def async_state(protocol: dict, played: int, cls: type) -> Any:
    """An asynchronous run's server state (`cls`: AsyncState) from a checkpoint's protocol entry. Written whole
    under "server" now; an older testbed wrote its fields as keys of their own and the version as the checkpoint's
    round (`played`), and its runs are resumed, not lost."""
    if "server" in protocol:
        return protocol["server"]
    names = {f.name for f in dataclasses.fields(cls)} - {"version"}
    return cls(version=played, **{name: protocol[name] for name in names if name in protocol})


def selector_state(saved: dict, fresh: Any, plugin) -> Any:
    """The selector's state from a checkpoint's selection entry (protocols/participation.py's saved(): "state").
    An older testbed kept the selector's attributes instead ("selector": its options and what it had learnt).
    A built-in's state is read from them, its state's fields being named as those attributes were (`fresh`: what
    init returns; None, for a selector that keeps none, is kept as it is), so its studies resume; a user
    selector's cannot be mapped without its author, and is refused in one line (`plugin`: contracts.py's Plugin,
    naming it)."""
    if "state" in saved:
        return saved["state"]
    older = saved.get("selector")
    if plugin.builtin and isinstance(older, dict):
        if fresh is None:
            return None
        if dataclasses.is_dataclass(fresh) and all(f.name in older for f in dataclasses.fields(fresh)):
            return dataclasses.replace(fresh, **{f.name: older[f.name] for f in dataclasses.fields(fresh)})
    raise TestbedError(f"resume: the checkpoint was written by an older testbed's selector ('{plugin.name}' kept "
                       "its state on itself, which this testbed cannot read); run without --resume to start over")


def link_rows(protocol: dict, now: float) -> tuple[list[dict], dict]:
    """links.csv's waiting rows from a checkpoint's protocol entry, as (the solves' rows, an asynchronous run's
    flows: network/inflight.py's saved()). An older testbed kept an asynchronous run's rows as the solves gave
    them, from its last aggregation on, the transfers still in flight included: the rows up to the checkpoint's
    instant are kept as they were, and the flows in flight are made again from that instant on."""
    if "link_flows" in protocol:
        return protocol.get("links", []), protocol["link_flows"]
    rows = [row | {"t_end_s": min(row["t_end_s"], now)} for row in protocol.get("links", []) if row["t_start_s"] < now]
    return rows, {"since": now, "rows": {}}
