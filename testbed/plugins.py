"""User code named from a scenario: a reference "package.module:attribute", or a short name an installed package
registers. Wherever a scenario names a built-in (an algorithm, a model, a dataset), it may name user code instead.

- A reference is imported from the current directory, the scenario file's folder or an installed package, and
  its attribute looked up (dots walk into it: "my_algos:Zoo.FedNova").
- An installed package registers short names in the entry-point groups below (pyproject.toml:
  `[project.entry-points."fl_edge_testbed.algorithms"] fednova = "my_algos:FedNova"`). A built-in's name always
  means the built-in: a package cannot change what a committed scenario runs by registering the same name.
- Every failure (no such module, no such attribute, an import that raises, the wrong kind of object) is a
  BadReference: one line naming the reference and the fix; the schema puts the scenario field in front of it.
- An exception raised inside code the scenario names, while it is built or run, is the user's to fix, not a bug
  of the testbed (crash, culprit): which code that is, is derived when it happens from the scenario at hand and
  sys.modules, never remembered here.
Plugin code runs only when a scenario naming it is validated or run: reading a run folder (report, compare,
load_run) never calls this module, so a received run folder cannot run code.
"""
from __future__ import annotations

import difflib
import importlib
import inspect
import os
import re
import sys
import traceback
from functools import cache
from typing import Any, Iterator, Mapping

from testbed.errors import PluginError, with_article, write_crash_log
from testbed.paths import user_path

GROUPS = {"algorithm": "fl_edge_testbed.algorithms", "model": "fl_edge_testbed.models",
          "dataset": "fl_edge_testbed.datasets", "selector": "fl_edge_testbed.selectors"}


class BadReference(ValueError):
    """A reference that does not lead to usable code; a ValueError, so the schema words it as a field's error."""


def is_reference(name: str) -> bool:
    return ":" in name


@cache
def registered(kind: str) -> dict[str, str]:
    """Short names that installed packages register for `kind`, and the reference each stands for. importlib.metadata
    is imported here, where a name is looked up: `--help` and a YAML error need none of it."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=GROUPS[kind])}


def known(kind: str, builtins: Mapping[str, Any], name: str) -> bool:
    """Whether `name` is a built-in, a registered short name or a reference (which may still fail to load)."""
    return name in builtins or name in registered(kind) or is_reference(name)


def choices(kind: str, builtins: Mapping[str, Any]) -> str:
    """The names a scenario may give for `kind`, for an error message."""
    names = sorted(builtins) + sorted(set(registered(kind)) - set(builtins))
    return ", ".join(names)


def unknown(kind: str, builtins: Mapping[str, Any], name: str) -> BadReference:
    if kind == "algorithm":  # the algorithm section's own wording: its names quoted, in the order of the zoo
        listed = ", ".join(repr(n) for n in [*builtins, *sorted(set(registered(kind)) - set(builtins))])
        return BadReference(f"unknown '{name}'; choose one of: {listed}; or name your own Strategy as "
                           "'package.module:Class'")
    return BadReference(f"unknown {kind} '{name}'; choose one of: {choices(kind, builtins)}; or name your own as "
                       "'package.module:attribute'")


def resolve(kind: str, builtins: Mapping[str, Any], name: str) -> Any:
    """What `name` stands for: the built-in, the code a registered short name points to, or the reference's."""
    if name in builtins:
        return builtins[name]
    if name in registered(kind):
        return load(registered(kind)[name], f"{kind} '{name}' registered by an installed package as")
    if is_reference(name):
        return load(name)
    raise unknown(kind, builtins, name)


def load(reference: str, origin: str = "") -> Any:
    """The object `reference` ("package.module:attribute") names; `origin` starts the error messages."""
    where = f"{origin} " if origin else ""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute or ":" in attribute:
        raise BadReference(f"{where}'{reference}' is not a reference; write 'package.module:attribute', "
                          "e.g. 'my_algos:FedNova'")
    _import_from_current_directory()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is None or not (module_name == err.name or module_name.startswith(err.name + ".")):
            raise BadReference(f"{where}'{reference}': importing {module_name} failed: {err}; install what it "
                              "imports") from None
        raise BadReference(f"{where}'{reference}': no module '{module_name}' in the current directory "
                          f"({os.getcwd()}), the scenario's folder or the installed packages; check its spelling, "
                          "put it beside the scenario, or pip install its package") from None
    except Exception as err:  # noqa: BLE001 - the user's module failed on import: their bug, said in one line
        raise BadReference(f"{where}'{reference}': importing {module_name} raised {type(err).__name__}: "
                          f"{' '.join(str(err).split())}; fix the module") from None
    found: Any = module
    for depth, part in enumerate(attribute.split(".")):
        if not hasattr(found, part):
            owner = module_name if depth == 0 else f"{module_name}:{'.'.join(attribute.split('.')[:depth])}"
            names = [n for n in dir(found) if not n.startswith("_")]
            close = difflib.get_close_matches(part, names, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; it has: {', '.join(names[:12])}"
            raise BadReference(f"{where}'{reference}': {owner} has no attribute '{part}'{hint}")
        found = getattr(found, part)
    return found


def where(obj: Any) -> str | None:
    """'file:line' of the code of a function, method or class's __call__ where Python knows it; None otherwise
    (how errors point to the plugin or callback that broke a rule)."""
    code = getattr(getattr(obj, "__func__", obj), "__code__", None)
    return None if code is None else f"{code.co_filename}:{code.co_firstlineno}"


def culprit(err: BaseException, named: Any) -> str | None:
    """Where in code that `named` (a scenario as data: its model_dump) names (not the testbed's) `err` was raised:
    'file:line in function' of the innermost such frame of its traceback; None where it came from the testbed or
    a library."""
    places = user_code(named)
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        path = os.path.abspath(frame.filename)
        if any(path == place or path.startswith(place + os.sep) for place in places):
            return f"{frame.filename}:{frame.lineno} in {frame.name}"
    return None


REFERENCE = re.compile(r"[\w.]+:[\w.]+")   # "package.module:attribute", as a scenario's field gives one


def user_code(named: Any) -> set[str]:
    """The files and package folders of the modules that the strings of `named` name, where imported (Python's
    own registry, sys.modules, says): a reference "package.module:attribute", or a short name an installed package
    registers (its entry point's reference; a user's package installed into site-packages is theirs too). A crash
    inside them is the user's to fix. Derived when asked, from the scenario at hand: nothing is remembered."""
    places = set()
    for text in _strings(named):
        reference = text if REFERENCE.fullmatch(text) else next(
            (registered(kind)[text] for kind in GROUPS if text in registered(kind)), None)
        module = sys.modules.get((reference or "").partition(":")[0])
        if module is None:
            continue
        top = sys.modules.get(module.__name__.partition(".")[0], module)
        places.update(os.path.abspath(place) for place in (getattr(module, "__file__", None),
                                                           *getattr(top, "__path__", ())) if place)
    return places


def _strings(value: Any) -> Iterator[str]:
    """Every string in nested dicts, lists and tuples (a model_dump)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def crash(err: BaseException, named: Any) -> PluginError | None:
    """A PluginError for `err` where code that `named` names (culprit) raised it: one line naming that code's
    file, line and function, and where its traceback is (err.log_file; a new file in the temporary folder where
    none was written); None where the testbed raised."""
    where = culprit(err, named)
    if where is None:
        return None
    log = user_path(getattr(err, "log_file", None) or write_crash_log(err))
    return PluginError(f"the plugin code at {where} raised {type(err).__name__}: {' '.join(str(err).split())}; fix "
                       f"it there (traceback in {log}; --debug shows it here)")


def _import_from_current_directory() -> None:
    """`python -m` puts the current directory on the path; the `testbed` command does not. A scenario's
    references are to be importable from where the user runs it, either way."""
    import_also_from(os.getcwd())


def import_also_from(folder: str | os.PathLike) -> None:
    """Let references import from `folder` too (a scenario's own folder: its code may sit beside it), after
    everything else on the path, so that it never shadows an installed module. Worker processes, which are
    spawned, inherit the path."""
    folder = os.path.abspath(folder)
    if folder not in sys.path and not (folder == os.getcwd() and "" in sys.path):
        sys.path.append(folder)


def check_subclass(found: Any, base: type, reference: str) -> None:
    """`found` must be a subclass of the interface `base` that defines its abstract methods and keeps the
    signature of every method it overrides (it must take the arguments the testbed passes)."""
    interface = f"{base.__module__}.{base.__name__}"
    if not (isinstance(found, type) and issubclass(found, base)):
        what = with_article(type(found).__name__) if not isinstance(found, type) else f"the class {found.__name__}"
        raise BadReference(f"'{reference}' is {what}, not a {base.__name__}; subclass {interface} "
                          "(docs/extending.md)")
    missing = sorted(getattr(found, "__abstractmethods__", ()))
    if missing:
        hooks = ", ".join(f"{m}({', '.join(inspect.signature(getattr(base, m)).parameters)})" for m in missing)
        raise BadReference(f"'{reference}' does not define {hooks}; add it (the interface: {interface})")
    for hook, declared in vars(base).items():
        if hook.startswith("_") or not inspect.isfunction(declared):
            continue
        own = inspect.getattr_static(found, hook)
        if own is declared or not inspect.isfunction(own):
            continue
        arguments = list(inspect.signature(declared).parameters)
        try:
            inspect.signature(own).bind(*arguments)
        except TypeError:
            raise BadReference(f"'{reference}'.{hook}{inspect.signature(own)} cannot be called as the testbed "
                              f"calls it, {hook}({', '.join(arguments)}); give it those parameters") from None


def check_callable(found: Any, reference: str, arguments: tuple[str, ...] | None, what: str) -> None:
    """`found` must be callable (with these positional arguments, where given: a model factory's)."""
    if not callable(found):
        raise BadReference(f"'{reference}' is {with_article(type(found).__name__)}, not {what}; name a function or "
                          "class")
    if arguments is None:
        return
    try:
        inspect.signature(found).bind(*arguments)
    except TypeError:
        raise BadReference(f"'{reference}'{inspect.signature(found)} cannot be called as {what} is, "
                          f"({', '.join(arguments)}); give it those parameters") from None
    except ValueError:  # a builtin without a signature: nothing to check before calling it
        pass
