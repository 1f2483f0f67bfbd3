"""A scenario file to a validated Scenario: YAML reading, `--set a.b=value` overrides, validation.

Every problem becomes a one-line TestbedError naming the file, the field path and the fix (testbed/schema/errors.py
words pydantic's errors). A key given twice in a mapping is refused (YAML says keys are unique; PyYAML would keep
the last silently). Reading and overriding import yaml alone, the schema only once the file reads as a
mapping; neither imports torch (the schema knows the built-in names from testbed/names.py), so a scenario is
answered, valid or not, before the run's modules are imported.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from testbed.errors import TestbedError

if TYPE_CHECKING:
    from testbed.schema.scenario import Scenario


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping. A merge key's (<<) values may be overridden:
    that is what merging is for."""

    def construct_mapping(self, node, deep=False):
        lines = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = lines.get(key)
            except TypeError:  # an unhashable key: PyYAML's own error names it
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"{key!r} is given twice in one mapping, first at line {first}; keep one of them",
                    key_node.start_mark)
            lines[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def read_yaml(path: str | Path) -> dict:
    path = Path(path)
    if path.is_dir():
        example = next(iter(sorted(path.glob("*.yaml")) + sorted(path.glob("*.yml"))), None)
        raise TestbedError(f"{path}: a directory, not a scenario file; give a YAML file"
                           + (f", e.g. {example}" if example else ""))
    if not path.is_file():
        raise TestbedError(f"{path}: no such scenario file")
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)
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
        return yaml.load(text, Loader=UniqueKeyLoader)
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
    from pydantic import ValidationError

    from testbed import plugins
    from testbed.schema.errors import describe
    from testbed.schema.scenario import Scenario

    plugins.import_also_from(base_dir)  # code a scenario names may sit beside it
    try:
        return Scenario.model_validate(raw, context={"base_dir": base_dir})
    except ValidationError as err:
        raise TestbedError(f"{source}: {describe(err)}") from None


def load(path: str | Path, overrides: list[str] = ()) -> Scenario:
    raw = apply_overrides(read_yaml(path), list(overrides))
    return validate(raw, str(path), Path(path).parent)

