"""Load one run folder, `runs/<scenario>/<seed>/`, as written by `testbed run`."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from analysis.metrics import summarize

SCENARIO_FILE = "scenario.resolved.yaml"
ROUNDS_FILE = "rounds.csv"
EVENTS_FILE = "events.csv"
SUMMARY_FILE = "summary.json"
DEVICES_FILE = "devices.csv"
BATTERY_FILE = "battery.csv"  # only where some device group has a battery (resource modelling)
LINKS_FILE = "links.csv"  # only where the scenario has shared links (network:)


@dataclass
class Run:
    path: Path
    name: str
    seed: int
    algorithm: str
    scenario: dict
    rounds: pd.DataFrame
    events: pd.DataFrame
    summary: dict
    # battery.csv: per round and battery group, its devices' levels (fractions of capacity) at the round's end;
    # None where no group has a battery
    battery: pd.DataFrame | None = None
    # links.csv: per round, each shared link's summed rate over intervals; None without a network section
    links: pd.DataFrame | None = None

    @property
    def label(self) -> str:
        return f"{self.name}/{self.seed}"

    @property
    def target_accuracy(self) -> float | None:
        return target_accuracy_of(self.scenario)

    @property
    def is_async(self) -> bool:
        """Whether the run is asynchronous (protocol.kind async); no protocol section means sync rounds."""
        return (self.scenario.get("protocol") or {}).get("kind") == "async"


def target_accuracy_of(scenario: dict) -> float | None:
    return (scenario.get("stop") or {}).get("target_accuracy")


def device_classes(run: Run) -> pd.Series:
    """Each device's class, indexed by device: its `profile` in devices.csv; where the run has no devices.csv
    (or no profile column), "all devices" for every device in events.csv."""
    devices = devices_of(run)
    if {"device", "profile"} <= set(devices.columns):
        return devices.set_index("device")["profile"].astype(str)
    ids = run.events.loc[run.events["phase"] != "server", "device"].unique()
    return pd.Series("all devices", index=pd.Index(ids, name="device"))


def devices_of(run: Run) -> pd.DataFrame:
    """devices.csv (one row per device: its group, profile, ...), empty where the run has none."""
    path = run.path / DEVICES_FILE
    return table_of(path, ()) if path.is_file() else pd.DataFrame()


def run_labels(runs: list[Run]) -> list[str]:
    """One distinct label per run: "<name>/<seed>", with the algorithm added where two runs share
    that label, and the folder itself as the last resort."""
    def counts(labels):
        return {label: labels.count(label) for label in labels}

    labels = [run.label for run in runs]
    seen = counts(labels)
    labels = [f"{run.name}/{run.algorithm}/{run.seed}" if seen[label] > 1 else label
              for run, label in zip(runs, labels)]
    seen = counts(labels)
    return [str(run.path) if seen[label] > 1 else label for run, label in zip(runs, labels)]


def scenario_groups(runs: list[Run]) -> dict[str, list[Run]]:
    """The runs by scenario, in the order first seen, to average over seeds: keyed "<name>", or
    "<name>/<algorithm>" where runs of one name differ in algorithm (those are never averaged together)."""
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.name, run.algorithm), []).append(run)
    names = [name for name, _ in groups]
    return {name if names.count(name) == 1 else f"{name}/{algorithm}": group
            for (name, algorithm), group in groups.items()}


def load_run(path) -> Run:
    """Read a run folder; every file but summary.json must be there."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(
            f"{path}: no such folder; expected a run folder runs/<scenario>/<seed>/ written by 'testbed run'")
    for required in (SCENARIO_FILE, ROUNDS_FILE, EVENTS_FILE):
        if not (path / required).is_file():
            raise FileNotFoundError(f"{path}: no {required} here; {_what_is_here(path)}")

    scenario = _read(path / SCENARIO_FILE, lambda p: yaml.safe_load(p.read_text()) or {}, dict)
    rounds = table_of(path / ROUNDS_FILE, ROUNDS_NUMERIC)
    events = table_of(path / EVENTS_FILE, EVENTS_NUMERIC)
    summary_path = path / SUMMARY_FILE
    # A run cut short has no summary.json yet; the tables are enough to rebuild it.
    summary = (_read(summary_path, lambda p: json.loads(p.read_text()), dict) if summary_path.is_file()
               else summarize(rounds, [target_accuracy_of(scenario)]))
    algorithm = scenario.get("algorithm")
    battery_path, links_path = path / BATTERY_FILE, path / LINKS_FILE
    return Run(
        path=path,
        name=str(scenario.get("name", path.parent.name)),
        seed=scenario.get("seed", path.name),
        algorithm=str(algorithm.get("name") if isinstance(algorithm, dict) else algorithm),
        scenario=scenario,
        rounds=rounds,
        events=events,
        summary=summary,
        battery=table_of(battery_path, ()) if battery_path.is_file() else None,
        links=table_of(links_path, ()) if links_path.is_file() else None,
    )


DAMAGED = "the run folder is damaged: run it again, or leave it out"


class DamagedRun(ValueError):
    """A run folder's file that cannot be read as the testbed wrote it (the command line says so in one line)."""


# the columns every run's tables have, numbers all (the other columns depend on the run)
ROUNDS_NUMERIC = ("round", "t_start_s", "t_end_s", "selected", "arrived", "bytes_up", "bytes_down", "flops",
                  "accuracy", "wasted_flops", "wasted_bytes", "dropped", "late", "surplus")  # summarize's
EVENTS_NUMERIC = ("round", "start_s", "end_s")
TEXT_COLUMNS = ("device", "phase", "outcome")  # events.csv's columns that need not be numbers (device: a label)


def _read(path: Path, reader, kind: type | None = None):
    """reader(path), where anything unreadable (or not a `kind`) is a DamagedRun naming the file."""
    try:
        value = reader(path)
    except (ValueError, UnicodeDecodeError, yaml.YAMLError, pd.errors.ParserError, OSError) as err:
        raise DamagedRun(f"{path}: unreadable ({type(err).__name__}); {DAMAGED}") from None
    if kind is not None and not isinstance(value, kind):
        raise DamagedRun(f"{path}: not what 'testbed run' writes there; {DAMAGED}")
    return value


def table_of(path: Path, numeric: tuple[str, ...], size: int | None = None) -> pd.DataFrame:
    """A run's csv table (its first `size` bytes), with these columns present and numeric, and, for rounds.csv
    and events.csv, every other column but TEXT_COLUMNS too; else a DamagedRun."""
    data = _read(path, lambda p: p.read_bytes()[:size])
    if data and not data.endswith(b"\n"):  # the testbed writes whole lines: a kill while writing tore this one
        raise DamagedRun(f"{path}: its last row is torn (the run stopped while writing it); testbed run --resume "
                         "cuts it, or run it again")
    table = _read(path, lambda p: pd.read_csv(io.BytesIO(data)))
    if path.name in (ROUNDS_FILE, EVENTS_FILE):
        numeric = tuple(numeric) + tuple(c for c in table.columns if c not in TEXT_COLUMNS and c not in numeric)
    broken = [c for c in numeric if c not in table or (len(table) and not pd.api.types.is_numeric_dtype(table[c]))]
    broken += [c for c in TEXT_COLUMNS if path.name == EVENTS_FILE and c not in table]
    if broken:
        raise DamagedRun(f"{path}: column {broken[0]} is missing or not numbers; {DAMAGED}")
    return table


def _what_is_here(path: Path) -> str:
    """A hint for the common mistake of passing the scenario folder instead of one of its seeds."""
    seeds = sorted(child.name for child in path.iterdir() if (child / ROUNDS_FILE).is_file())
    if seeds:
        return f"it looks like a scenario folder; pass one of its seed folders: {', '.join(seeds)}"
    return "is this a run folder written by 'testbed run'?"
