"""Which run folders a report covers. Each path given is either a run folder (it holds one of the files
`testbed run` writes first: read as such, so that a damaged one is an error naming it) or a folder that holds
runs at any depth: then every run folder under it is covered, a sweep's and lone runs alike, as users lay them
out (runs/<scenario>/<seed>, a sweep's runs/<scenario>/<scenario>-<values>/<seed>, folders of their own).

Under a folder, a sweep's runs come in its index's order (sweep.csv, written by `testbed sweep`), the others in
path order. What such a folder holds but a report cannot cover is skipped, each with one line naming it and
why: a run folder that cannot be read (a table torn by a kill, a file missing or unreadable) and a sweep's
combination that has not started. Folders without a run's files (plots/, report/) are not runs, nor are the
copies of run folders that trackers keep beside them (`--track`): an MLflow store's artifacts
(mlartifacts/<experiment>/<run id>/artifacts/, or mlruns/...) and W&B's files (wandb/offline-run-<time>-<id>/files/,
where WANDB_DIR puts them under the folder): left out silently.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.runs import EVENTS_FILE, ROUNDS_FILE, SCENARIO_FILE, DamagedRun, Run, load_run

SWEEP_INDEX = "sweep.csv"   # written by testbed sweep: one row per combination, its run folder in `folder`
RUN_FILES = (SCENARIO_FILE, ROUNDS_FILE, EVENTS_FILE)   # a folder holding any of them is a run's
# Trackers' own folders of a run, and the subfolder where they keep its files (copies of the run folder's):
# MLflow's <run id>/artifacts, W&B's (offline-)run-<YYYYMMDD_HHMMSS>-<id>/files
TRACKER_COPIES = ((re.compile(r"[0-9a-f]{32}"), "artifacts"), (re.compile(r"(offline-)?run-\d{8}_\d{6}-\w+"), "files"))


@dataclass
class Found:
    folders: list[Path]                                 # the run folders to report, in order
    skipped: list[str] = field(default_factory=list)    # one line each: what was left out, and why
    loaded: dict[Path, Run] = field(default_factory=dict)   # those read while looking (under a folder given)

    def runs(self) -> list[Run]:
        """The folders' runs, each read once: those read while looking are not read again."""
        return [self.loaded.get(folder) or load_run(folder) for folder in self.folders]


def find_runs(paths: list) -> Found:
    """The run folders of the paths (see the module's docstring); FileNotFoundError where none is found."""
    found = Found([])
    for path in map(Path, paths):
        if is_run_folder(path) or not path.is_dir():
            found.folders.append(path)   # named by the user: load_run says what is wrong with it, if anything
        else:
            _add_runs_under(path, found)
    found.folders = list(dict.fromkeys(found.folders))
    if not found.folders:
        raise FileNotFoundError(f"{', '.join(map(str, paths))}: no run folder here (none holds {ROUNDS_FILE}); "
                                + ("; ".join(found.skipped) if found.skipped else "give run folders written by "
                                   "'testbed run' or a folder that holds them"))
    return found


def runs_of(items: list) -> list[Run]:
    """The runs of these items: Runs already read, as they are; else paths, found (find_runs) and read once."""
    if items and all(isinstance(item, Run) for item in items):
        return list(items)
    return find_runs(items).runs()


def is_run_folder(path: Path) -> bool:
    return any((path / name).is_file() for name in RUN_FILES)


def tracker_copy(folder: Path, name: str) -> bool:
    """Whether folder/name is where a tracker keeps its copy of a run's files, not a run."""
    return any(run.fullmatch(folder.name) and name == files for run, files in TRACKER_COPIES)


def _add_runs_under(root: Path, found: Found) -> None:
    """Every readable run folder under root into found.folders, the others into found.skipped."""
    candidates: list[Path] = []
    for folder, subfolders, files in os.walk(root):
        folder = Path(folder)
        subfolders.sort()
        subfolders[:] = [name for name in subfolders if not tracker_copy(folder, name)]
        if SWEEP_INDEX in files:
            candidates += _sweep_runs(folder, found)
        if is_run_folder(folder):
            subfolders.clear()   # a run's own folders (plots/) hold no runs
            candidates.append(folder)
    for folder in dict.fromkeys(candidates):
        if not (folder / ROUNDS_FILE).is_file():
            found.skipped.append(f"skipped {folder}: no {ROUNDS_FILE}: its run has not started (or stopped before "
                                 "writing its tables)")
            continue
        try:
            found.loaded[folder] = load_run(folder)
        except (DamagedRun, FileNotFoundError) as err:
            found.skipped.append(f"skipped {err}")
        else:
            found.folders.append(folder)


def _sweep_runs(folder: Path, found: Found) -> list[Path]:
    """The run folders a sweep's index lists, in its order; a combination without one is skipped. The index's
    folders are <out>/<scenario>/<scenario>-<values>/<seed> as the sweep was given <out>, often relative to where it
    ran: read from the sweep's own folder, <out>/<scenario>, wherever that is now."""
    try:
        index = pd.read_csv(folder / SWEEP_INDEX)
        listed = [(folder.joinpath(*Path(name).parts[-2:]), status)
                  for name, status in zip(index["folder"], index.get("status", [None] * len(index)))]
    except (ValueError, KeyError, TypeError, OSError, pd.errors.ParserError):
        found.skipped.append(f"skipped {folder / SWEEP_INDEX}: unreadable as a sweep's index (a 'folder' column); "
                             "the runs beside it are reported without its order")
        return []
    missing = [(run, status) for run, status in listed if not is_run_folder(run)]
    found.skipped += [f"skipped {run}: this sweep's combination has not started"
                      + (f" (sweep.csv: {status})" if isinstance(status, str) else "") for run, status in missing]
    return [run for run, _ in listed if is_run_folder(run)]
