"""`testbed sweep`: every combination of a grid of scenario fields, run one after another through the scenario's
executor, each into its own folder, skipping combinations already completed and resuming the others from their
checkpoint (`testbed run --resume`), with an index of the runs.

Layout: `<out>/<scenario>/sweep.csv` (the index: one row per combination with its grid values, folder and
status) and one run folder per combination, `<out>/<scenario>/<scenario>-<values>/<seed>/`, its scenario
named `<scenario>-<values>` (the grid values other than the seed, joined by '-'), so that
`testbed run FILE --set name=<scenario>-<values> ... --out <out>/<scenario>` writes the same folder.
"""
from __future__ import annotations

import copy
import itertools
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from analysis.terminal import fit_table, wrap
from testbed import scenario as sc
from testbed.errors import TestbedError
from testbed.parallel import Job, progress_printer, run_jobs
from testbed.paths import user_path
from testbed.runlog import first_difference, run_folder
from testbed.runner import Watch, run_scenario
from testbed.trackers import TrackedGroup, say_group

ALIASES = {"algorithm": "algorithm.name"}   # --grid algorithm=[...] sets the algorithm's name
INDEX = "sweep.csv"
COMPLETED, NOT_STARTED = "completed", "not started"


@dataclass
class Combination:
    values: dict                # grid path -> value
    scenario: sc.Scenario
    folder: Path

    @property
    def status(self) -> str:
        """summary.json's status; 'not started' without one."""
        summary = self.folder / "summary.json"
        return json.loads(summary.read_text()).get("status", "unknown") if summary.is_file() else NOT_STARTED


def parse_grid(items: list[str]) -> dict[str, list]:
    """['algorithm=[fedavg,fedlps]', 'seed=[0,1]'] -> {'algorithm.name': ['fedavg', 'fedlps'], 'seed': [0, 1]}.
    Values are YAML, as --set's; a single value is a one-value axis."""
    axes = []
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key or not text:
            raise TestbedError(f"--grid {item}: expected KEY=[VALUE,...], e.g. --grid seed=[0,1,2]")
        try:
            values = yaml.safe_load(text)
        except yaml.YAMLError:
            raise TestbedError(f"--grid {item}: {text} is not a YAML list; write e.g. [0.1, 0.01]") from None
        axes.append((key, values, f"--grid {item}"))
    return grid_of(axes)


def grid_of(axes: list[tuple[str, object, str]]) -> dict[str, list]:
    """The grid of (field, values, origin) axes, `origin` (how the user gave the axis) starting its errors: an
    alias resolved ('algorithm' -> 'algorithm.name'), a single value as a one-value axis, and an empty axis, a
    field given twice or a value listed twice refused."""
    grid = {}
    for key, values, origin in axes:
        values = values if isinstance(values, list) else [values]
        path = ALIASES.get(key, key)
        if not values:
            raise TestbedError(f"{origin}: no values; list at least one")
        if path in grid:
            raise TestbedError(f"{origin}: {path} is already on the grid; give all its values in one --grid")
        if len({json.dumps(v, sort_keys=True, default=str) for v in values}) < len(values):
            raise TestbedError(f"{origin}: a value is listed twice; list each once")
        grid[path] = values
    return grid


def label(values: dict) -> str:
    """The grid values other than the seed as a folder-name part: 'fedavg-high'."""
    return "-".join(re.sub(r"[^A-Za-z0-9_.]+", "_", str(v)).strip("_") for k, v in values.items() if k != "seed")


def plan(raw: dict, source: str, base_dir: Path, grid: dict[str, list],
         out: str | Path) -> tuple[Path, list[Combination]]:
    """The sweep's folder, and every combination of the scenario `raw` (read from `source`, named in errors; its
    relative paths resolve against base_dir) validated and placed, before anything runs: a bad grid value stops
    the sweep here. An algorithm other than the scenario's starts from its own defaults, not from the
    scenario's hyper-parameters."""
    root = Path(out) / str(raw.get("name", Path(source).stem))
    combinations = []
    for values in itertools.product(*grid.values()):
        values = dict(zip(grid, values))
        combo = copy.deepcopy(raw)
        if values.get("algorithm.name", _algorithm_name(raw)) != _algorithm_name(raw):
            combo["algorithm"] = {}
        for path, value in values.items():
            sc.set_path(combo, path, value, f"--grid {path}={value}")
        if label(values) and "name" in raw:
            combo["name"] = f"{raw['name']}-{label(values)}"
        where = ", ".join(f"{k}={v}" for k, v in values.items())
        scenario = sc.validate(combo, f"{source} ({where})", base_dir)
        combinations.append(Combination(values, scenario, run_folder(root, scenario)))
    folders = [c.folder for c in combinations]
    if len(set(folders)) < len(folders):
        clash = next(f for f in folders if folders.count(f) > 1)
        raise TestbedError(f"--grid: two combinations would share the run folder {user_path(clash)}; use values "
                           "that differ as folder names")
    for combo in combinations:
        _refuse_stale(combo)
    return root, combinations


def _algorithm_name(raw: dict):
    algorithm = raw.get("algorithm")
    return algorithm.get("name") if isinstance(algorithm, dict) else None


def _refuse_stale(combo: Combination) -> None:
    """A completed run of another scenario (the file changed since) must be neither skipped nor overwritten."""
    if combo.status != COMPLETED:
        return
    before = yaml.safe_load((combo.folder / "scenario.resolved.yaml").read_text())
    now = combo.scenario.model_dump(mode="json")
    if before != now:
        raise TestbedError(f"{user_path(combo.folder)}: holds a completed run of another scenario "
                           f"({first_difference(before, now)}); move it away or sweep into another --out")


def write_index(combinations: list[Combination], path: Path) -> pd.DataFrame:
    index = pd.DataFrame([{**c.values, "folder": str(c.folder), "status": c.status} for c in combinations])
    path.parent.mkdir(parents=True, exist_ok=True)
    index.to_csv(path, index=False)
    return index


def sweep(raw: dict, source: str, base_dir: Path, grid: dict[str, list], out: str | Path = "runs",
          quiet: bool = False, jobs: int = 1, ray_address: str | None = None,
          track: tuple[str, ...] = ()) -> pd.DataFrame:
    """Run every combination not yet completed, from its checkpoint where a run stopped (from round 1 where it
    has none), then print the index. The index is rewritten after each run, so that it tells where a stopped
    sweep was. jobs > 1 runs that many at once in local processes, ray_address as Ray tasks (testbed/parallel.py);
    the tables are those of a serial sweep. track: each run tracked (testbed/trackers/), the sweep its group. Returns the index (sweep.csv's rows); raises TestbedError at the end
    when some runs did not complete (their folders keep what they did)."""
    root, combinations = plan(raw, source, base_dir, grid, out)
    index_path = root / INDEX
    write_index(combinations, index_path)
    tracked = TrackedGroup(root, "*/*", sum(c.status != COMPLETED for c in combinations), Path(out), root.name)
    say_group(track, tracked, "start", quiet)   # where the trackers keep the runs: said here, not by each run
    todo = []
    for n, combo in enumerate(combinations, 1):
        where = ", ".join(f"{k}={v}" for k, v in combo.values.items())
        if combo.status == COMPLETED:
            print(wrap(f"[{n}/{len(combinations)}] {where}: completed before, skipped ({user_path(combo.folder)})"))
            continue
        before = combo.status
        doing = "running into" if before == NOT_STARTED else f"resuming ({_outcome(before)}) in"
        print(wrap(f"[{n}/{len(combinations)}] {where}: {doing} {user_path(combo.folder)}"), flush=True)
        job = Job(combo.scenario, f"{source} ({where})", root, resume=True, label=where,
                  watch=Watch(track=tuple(track), group=root.name, out=Path(out), announce=False))
        if jobs > 1 or ray_address is not None:
            todo.append(job)
            continue
        try:
            run_scenario(combo.scenario, job.source, root, quiet, resume=True, watch=job.watch)
        except TestbedError as err:  # the run's folder says so; the other combinations still run
            print(f"  {err}", file=sys.stderr)
        finally:
            write_index(combinations, index_path)
    if todo:
        show = progress_printer(len(todo))

        def done(outcome):
            show(outcome)
            write_index(combinations, index_path)

        run_jobs(todo, jobs, ray_address, done)
    index = write_index(combinations, index_path)
    print(f"\n{printed_index(index, list(grid))}\n\nindex: {user_path(index_path)}")
    say_group(track, tracked, "end", quiet)
    unfinished = index[index["status"] != COMPLETED]
    if len(unfinished):
        raise TestbedError(f"{len(unfinished)} of {len(index)} runs did not complete "
                           f"({', '.join(map(user_path, unfinished['folder']))}); see {user_path(index_path)}")
    return index


def printed_index(index: pd.DataFrame, grid: list[str]) -> str:
    """The index as the sweep prints it, within a terminal's width (analysis.terminal): folders as the user reads
    them and each status's first word (a failed run's error is in its summary.json and sweep.csv)."""
    cells = index.astype(str).assign(folder=index["folder"].map(user_path), status=index["status"].map(_outcome))
    return fit_table(cells, grid)


def _outcome(status: str) -> str:
    """A run's status in a word: 'failed: round 3: ...' -> 'failed'."""
    return status.split(":")[0]
