"""A user's device catalog file: their own device profiles, with a source for every figure, in YAML or CSV.

One layout in two syntaxes. A profile is a `name` (letters, digits, `_ . -`) and DeviceProfile's figures, in
DeviceProfile's units exactly:

    peak_flops      FLOP/s as vendors quote it (two per fused multiply-add), fp32       required
    efficiency      fraction of the peak reached when training, in (0, 1]               required
    up_Bps          uplink in bytes/s (not bits: 1 Mbit/s is 125000)                    required
    down_Bps        downlink in bytes/s                                                 required
    latency_s       one-way network latency in seconds, >= 0                            required
    train_W, up_W, down_W, idle_W   the whole device's watts training, sending,         optional: energy
                    receiving and idle (awake, waiting)
    memory_bytes    bytes of RAM a training process may use                             optional: memory limits
    memory_Bps      memory bandwidth in bytes/s                                         optional: compute: latency
    call_overhead_s seconds each dispatched operation costs beyond its work             optional: compute: latency
    sparse_efficiency  share of its dense rate the device's sparse kernels reach on     optional: compute: latency
                    a masked model's kept entries, in (0, 1] (testbed/latency/clock.py)

and, for every figure it gives, `<figure>_source`: where that figure comes from, or "assumed: why" (the built-in
catalog in devices/catalog.py documents each of its figures the same way). A profile may also carry `latency`, the
predictors `testbed calibrate` fitted on a real device (devices/latency.py: its format, its machine, its fitted
terms); the calibration names its own origin (`latency.machine`), so it has no `_source`; YAML only.

YAML: a list of profiles, each a mapping of those keys::

    - name: pixel7_cpu
      peak_flops: 1.2e+11
      peak_flops_source: "Tensor G2 CPU cores, vendor sheet"
      efficiency: 0.04
      efficiency_source: "assumed: as the built-in phones (MNN training on a Meizu 16T)"
      ...

CSV: a header row of those keys and one profile a line; an empty cell is a figure (and its source) not given.

Every problem is one line naming the file, the profile and its entry (YAML) or line (CSV), the key, and the fix:
a missing required figure, a figure without its source, a source without its figure, a value that is not a
number or out of range, a duplicate name, a name the built-in catalog already has, an unknown key.
"""
import csv
import hashlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from .catalog import CATALOG
from .latency import calibration_from_dict
from .profiles import POWER_FIELDS, RESOURCE_FIELDS, ROOFLINE_FIELDS, SPARSE_FIELD, DeviceProfile

REQUIRED_FIGURES = ("peak_flops", "efficiency", "up_Bps", "down_Bps", "latency_s")
FIGURES = REQUIRED_FIGURES + RESOURCE_FIELDS + ROOFLINE_FIELDS + (SPARSE_FIELD,)
UNITS = {"peak_flops": "FLOP/s", "efficiency": "a fraction of the peak", "up_Bps": "bytes/s", "down_Bps": "bytes/s",
         "latency_s": "seconds", "memory_bytes": "bytes", "memory_Bps": "bytes/s",
         "call_overhead_s": "seconds", SPARSE_FIELD: "a share of the dense rate, in (0, 1]"} | \
    {field: "watts" for field in POWER_FIELDS}
SOURCE_SUFFIX = "_source"
KEYS = ("name",) + tuple(key for figure in FIGURES for key in (figure, figure + SOURCE_SUFFIX)) + ("latency",)
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+$")  # a profile's name ends up in tables and plot labels
SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".csv": "csv"}


@dataclass(frozen=True)
class DeviceCatalog:
    """The profiles of one catalog file, by name in the file's order, and the SHA-256 of the bytes read."""

    profiles: dict[str, DeviceProfile]
    sha256: str


def load_device_catalog(path) -> DeviceCatalog:
    """Read a catalog file (module docstring); a bad one raises ValueError in one line, an unreadable one OSError."""
    path = Path(path)
    syntax = SUFFIXES.get(path.suffix.lower())
    if syntax is None:
        raise ValueError(f"{path}: a device catalog is a .yaml, .yml or .csv file; rename it or convert it")
    content = path.read_bytes()
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.start}); save it as UTF-8") from None
    entries = _yaml_entries(path, text) if syntax == "yaml" else _csv_entries(path, text)
    if not entries:
        raise ValueError(f"{path}: no profiles; add at least one (see devices/catalog_file.py for the layout)")
    profiles: dict[str, DeviceProfile] = {}
    for where, entry in entries:
        profile = _profile(f"{path}: {where}", entry)
        if profile.name in profiles:
            raise ValueError(f"{path}: {where}: name: '{profile.name}' is already a profile of this file; "
                             "give each profile its own name")
        profiles[profile.name] = profile
    return DeviceCatalog(profiles, hashlib.sha256(content).hexdigest())


def _yaml_entries(path: Path, text: str) -> list[tuple[str, dict]]:
    try:
        entries = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # C: calibrations are long
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise ValueError(f"{path}{where}: not valid YAML ({getattr(err, 'problem', err)})") from None
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ValueError(f"{path}: a YAML device catalog is a list of profiles (- name: ..., peak_flops: ...)")
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            raise ValueError(f"{path}: entry {number}: a profile is a mapping (name: ..., peak_flops: ...)")
    return [(f"profile {_label(e.get('name'))} (entry {n})", e) for n, e in enumerate(entries, start=1)]


def _csv_entries(path: Path, text: str) -> list[tuple[str, dict]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    entries = []
    for row in reader:
        if None in row:  # more cells than the header has columns
            raise ValueError(f"{path}: line {reader.line_num}: more cells than the header's "
                             f"{len(reader.fieldnames)} columns; remove the extra cells or quote a comma")
        cells = {key.strip(): value.strip() for key, value in row.items() if value is not None}
        if not any(cells.values()):
            continue  # a blank line
        given = {key: value for key, value in cells.items() if value != ""}
        entries.append((f"profile {_label(given.get('name'))} (line {reader.line_num})", given))
    return entries


def _label(name) -> str:
    return f"'{name}'" if isinstance(name, str) and name else "without a name"


def _profile(where: str, entry: dict) -> DeviceProfile:
    unknown = [key for key in entry if key not in KEYS]
    if unknown:
        raise ValueError(f"{where}: {unknown[0]}: unknown key; use name, the figures "
                         f"({', '.join(FIGURES)}) and a <figure>{SOURCE_SUFFIX} for each figure given")
    name = entry.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ValueError(f"{where}: name: {'required' if name is None else f'{name!r} is not a name'}; give the "
                         "profile a name of letters, digits, _ . or -")
    if name in CATALOG:
        raise ValueError(f"{where}: name: '{name}' is a built-in profile; rename yours (e.g. '{name}_mine'), or "
                         "remove it from the file and use the built-in")
    figures, sources = {}, []
    for figure in FIGURES:
        key = figure + SOURCE_SUFFIX
        value, source = entry.get(figure), entry.get(key)
        if value is None:
            if figure in REQUIRED_FIGURES:
                raise ValueError(f"{where}: {figure}: required; add it with its {key}")
            if source is not None:
                raise ValueError(f"{where}: {key}: a source for no figure; add {figure} or remove {key}")
            continue
        if not isinstance(source, str) or not source.strip():
            raise ValueError(f"{where}: {key}: every figure needs its source; say where {figure} comes from "
                             "(a datasheet, a paper, a measurement) or 'assumed: why'")
        figures[figure] = _number(where, figure, value)
        sources.append(f"{figure}: {source.strip()}")
    if entry.get("latency") is not None:
        if isinstance(entry["latency"], str):
            raise ValueError(f"{where}: latency: a calibration is a YAML mapping (testbed calibrate writes it); "
                             "keep calibrated profiles in a YAML file")
        figures["latency"] = calibration_from_dict(where, entry["latency"])
    try:
        return DeviceProfile(name=name, source="; ".join(sources), **figures)
    except ValueError as err:  # its message starts with the field: "efficiency must be a number in (0, 1], got 2"
        raise ValueError(f"{where}: {err}; correct it in the file") from None


def _number(where: str, figure: str, value) -> float:
    """A figure as a float: YAML reads 1.2e11 (no dot or sign in the exponent) as text, and CSV is all text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)  # DeviceProfile refuses "inf" and "nan" as any other value out of range
        except ValueError:
            pass
    raise ValueError(f"{where}: {figure}: {value!r} is not a number; give a finite number ({UNITS[figure]})")
