"""A scenario file to a validated Scenario: YAML reading, `--set a.b=value` overrides, validation.

Every problem becomes a one-line TestbedError naming the file, the field path and the fix (testbed/schema/errors.py
words pydantic's errors).
"""
from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from testbed import plugins
from testbed.errors import TestbedError
from testbed.schema.errors import describe
from testbed.schema.scenario import Scenario


def read_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise TestbedError(f"{path}: no such scenario file")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise TestbedError(f"{path}: not UTF-8 text (byte {err.start}); save the scenario as UTF-8 YAML") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise TestbedError(f"{path}{where}: not valid YAML ({getattr(err, 'problem', err)})") from None
    if not isinstance(raw, dict):
        raise TestbedError(f"{path}: a scenario is a YAML mapping (name:, data:, model:, fleet:, ...)")
    return raw


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """`a.b.c=value` sets raw['a']['b']['c'] = YAML-parsed value; a number indexes a list (fleet.groups.0.count)."""
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise TestbedError(f"--set {item}: expected KEY.PATH=VALUE, e.g. --set stop.max_rounds=5")
        set_path(raw, key, yaml_value(value, f"--set {item}"), f"--set {item}")
    return raw


def yaml_value(text: str, origin: str):
    """A --set or --grid value, parsed as YAML; what YAML cannot read is named in one line."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise TestbedError(f"{origin}: not a YAML value ({getattr(err, 'problem', None) or err}); quote it, "
                           "e.g. --set name='a b'") from None


def set_path(raw: dict, key: str, value, origin: str) -> None:
    """raw[a][b][c] = value for key "a.b.c", creating sections; `origin` (the option) starts the errors."""
    *parents, leaf = key.split(".")
    node = raw
    for part in parents:
        slot = _slot(node, part, origin)
        if isinstance(node, dict):
            node.setdefault(slot, {})
        node = node[slot]
    node[_slot(node, leaf, origin)] = value


def _slot(node, part: str, origin: str) -> str | int:
    """The key, or list index, that `part` names in `node`."""
    if isinstance(node, dict):
        return part
    if isinstance(node, list):
        if part.isdigit() and int(part) < len(node):
            return int(part)
        raise TestbedError(f"{origin}: '{part}' is not an index of this {len(node)}-item list")
    raise TestbedError(f"{origin}: the value before '{part}' is not a section")


def validate(raw: dict, source: str = "scenario", base_dir: Path = Path(".")) -> Scenario:
    plugins.import_also_from(base_dir)  # code a scenario names may sit beside it
    try:
        return Scenario.model_validate(raw, context={"base_dir": base_dir})
    except ValidationError as err:
        raise TestbedError(f"{source}: {describe(err)}") from None


def load(path: str | Path, overrides: list[str] = ()) -> Scenario:
    raw = apply_overrides(read_yaml(path), list(overrides))
    return validate(raw, str(path), Path(path).parent)

