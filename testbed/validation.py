"""A scenario validated whole: the schema's checks (testbed/scenario_file.py: plain data, which asks its plugins
class-level questions only), then the questions only a built plugin answers, asked of the selector as the
composition root builds it (selector_of: testbed/build.py takes the run's selector from here, so the one function
that builds a selector is the one place its instance is asked anything). `testbed validate`, `testbed run` and
sweeps validate through here (testbed/api.py, testbed/sweeps.py, testbed/scenario.py's re-export), so they refuse
what a run would refuse, before it starts, in one line. Imports no torch, as `testbed validate` must not
(tests/testbed/test_validate_fast.py): that is why this is not build.py, which does.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from testbed import plugins, scenario_file
from testbed.errors import TestbedError, refused_options

if TYPE_CHECKING:
    from testbed.schema.scenario import Scenario
    from testbed.selection import Selector


def validate(raw: dict, source: str = "scenario", base_dir: Path = Path(".")) -> Scenario:
    """The scenario `raw` (read from `source`, named in errors; relative paths from base_dir) validated by the
    schema, then its selector built and asked (selector_of) and dropped."""
    return checked(scenario_file.validate(raw, source, base_dir), source)


def load(path: str | Path, overrides: list[str] = ()) -> Scenario:
    """The scenario file at `path`, with its `--set` overrides, validated as validate() does."""
    return checked(scenario_file.load(path, overrides), str(path))


def checked(scenario: Scenario, source: str) -> Scenario:
    """`scenario`, once the selector built of it answers what only an instance answers (selector_of)."""
    with named_after(scenario, source):
        selector_of(scenario)
    return scenario


@contextmanager
def named_after(scenario: Scenario, source: str) -> Iterator[None]:
    """What building `scenario`'s parts raises, said as validation says it: a TestbedError after `source`; a crash
    inside code the scenario names, a PluginError naming its file and line (plugins.crash); the testbed's own
    crash as it is (a bug)."""
    try:
        yield
    except TestbedError as err:
        raise type(err)(f"{source}: {err}") from err.__cause__   # a PluginError stays one, its cause chained
    except Exception as err:  # noqa: BLE001 - triaged: the user's code, or re-raised as the testbed's bug
        said = plugins.crash(err, scenario.model_dump())
        if said is None:
            raise
        raise said from err


def selector_of(scenario: Scenario) -> Selector:
    """A fresh selector of the scenario's `selection:` section (its class with its options), refused in one line
    where its constructor refuses the options, where it picks against a round deadline and the synchronous
    rounds have none (needs_deadline), or where it cannot pick for the asynchronous dispatch or the edge rounds
    the protocol runs (async_refusal). The schema asked its class already (a Selector, not of the older
    interface, options by name and type, ASYNC)."""
    section, kind = scenario.selection, scenario.protocol.kind
    try:
        selector = section.selector_class()(**section.options)
    except (TypeError, ValueError) as err:
        raise refused_options("selection", section.name, err) from None
    if kind != "async" and scenario.round.deadline_s is None and selector.needs_deadline():
        raise TestbedError(f"selection: '{section.name}' picks devices that fit a round deadline and none is set; "
                           "add round.deadline_s, or a deadline_s to selection.options")
    refusal = None if kind == "sync" else selector.async_refusal()
    if refusal and kind == "async":
        raise TestbedError(refusal)
    if refusal:   # hierarchical: an edge round runs no probe either
        raise TestbedError(f"selection.options: '{section.name}' asks for a probe at a round's start, which an edge "
                           "round does not run; change the option (e.g. loss: reported) or use protocol kind sync")
    return selector
