"""Per-round callbacks of the Python API (`testbed.run(..., on_round=fn)`): a notebook plots a run live, or stops
it at a target of its own.

Semantics:
- Each callback is called once a round (once an aggregation in an asynchronous run), in the rounds' order, with
  the round's row as rounds.csv holds it: a dict of the table's columns, NaN where the round was not evaluated.
  It is called before the row is written.
- It returns None (or False) to go on; True, or a reason (a str), to end the run after this round, as reaching
  stop.target_accuracy does: the row is written, the checkpoint saved as the run's end, summary.json's status
  is `completed` and its `stop_reason` says `on_round: <reason>`. In an asynchronous run the tasks in flight are
  cut at that instant, as at any run's end ('unfinished', their work wasted), and the written row counts them
  (the callback saw the row before they were cut).
- A numpy or torch scalar counts as its Python value: `numpy.bool_(True)` (what `row["accuracy"] > np.float64(x)`
  gives) stops the run as True does.
- Several callbacks each see every row; the first reason given is kept.
- A callback that raises, or returns anything else, stops the run with a PluginError (a TestbedError) that names
  it (its exception chained as the cause); the rounds written before are kept.
- A resumed run calls them from the round it resumes at.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable

from testbed import plugins
from testbed.errors import PluginError, TestbedError

Callback = Callable[[dict], object]


def named(callback: Callback) -> str:
    """How errors name a callback: its qualified name and, where Python knows them, its file and line."""
    name = (getattr(callback, "__qualname__", None) or type(callback).__name__).split("<locals>.")[-1]
    place = plugins.where(callback)
    return name if place is None else f"{name} ({place})"


def checked(callbacks: Iterable[Callback]) -> tuple[Callback, ...]:
    """The callbacks (one or several) as a tuple, each one callable."""
    if callable(callbacks) or callbacks is None:
        callbacks = () if callbacks is None else (callbacks,)
    callbacks = tuple(callbacks)
    for callback in callbacks:
        if not callable(callback):
            raise TestbedError(f"on_round: {callback!r} is not callable; give a function of the round's row")
    return callbacks


def table_row(row: dict, columns: list[str]) -> dict:
    """A round's row as rounds.csv holds it: the table's columns, NaN where the round has none (not evaluated)."""
    return {column: row.get(column, math.nan) for column in columns}


def asker(callbacks: tuple[Callback, ...], columns: list[str]) -> Callable[[dict], str | None] | None:
    """What the engine asks with each row (testbed/protocols/stopping.py): the callbacks called on the row's table
    columns; the reason to stop the first one gave, or None. None where there are no callbacks."""
    if not callbacks:
        return None

    def ask(row: dict) -> str | None:
        shown = table_row(row, columns)
        first = None
        for callback in callbacks:
            try:
                answer = callback(dict(shown))   # a copy each: one callback's edits are not the next one's row
            except Exception as err:  # noqa: BLE001 - the user's code: said in one line, the cause chained
                raise PluginError(f"on_round: {named(callback)} raised {type(err).__name__} at round {shown['round']}: "
                                   f"{' '.join(str(err).split())}") from err
            reason = _reason(callback, answer, shown)
            first = first if first is not None else reason
        return first

    return ask


def _reason(callback: Callback, answer: object, row: dict) -> str | None:
    answer = _as_python(answer)
    if answer is None or answer is False:
        return None
    if answer is True:
        return f"on_round: {named(callback)} at round {row['round']}"
    if isinstance(answer, str):
        return f"on_round: {answer}"
    shown = repr(answer) if len(repr(answer)) <= 40 else repr(answer)[:37] + "..."
    raise PluginError(f"on_round: {named(callback)} returned {type(answer).__name__} {shown}; return None or False to "
                      "go on, True or a reason (a str) to stop the run (a numpy or torch bool counts as a bool)")


def _as_python(answer: object) -> object:
    """A numpy scalar or a one-element torch tensor as its Python value (numpy.bool_(True) is True); anything
    else as it is."""
    module = type(answer).__module__.partition(".")[0]
    if module in ("numpy", "torch") and getattr(answer, "shape", None) == () and hasattr(answer, "item"):
        return answer.item()
    return answer
