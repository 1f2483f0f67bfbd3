"""Where a tracker keeps a run's (or several runs') records and the command that opens them: the lines `--track`
prints when a run or a sweep starts and when it ends, so that a tracked run says where it wrote.

One line a tracker at each end, `<tracker>: <what>; <verb>: <command>`, e.g.

    tensorboard: logging; watch: tensorboard --logdir runs/quickstart/0/tensorboard
    mlflow: logged run quickstart/0; open: mlflow ui --backend-store-uri sqlite:///runs/mlflow.db
    wandb: kept offline; upload: wandb sync runs/quickstart/0/wandb/offline-run-20261129_102400-45il9dy6

Paths under the current folder are shown relative to it (a line is short, and the command works as printed
from where the run was started); others whole. Each backend makes its Place (tensorboard.py, mlflow.py, wandb.py):
a started tracker its run's exactly, `group_place` a sweep's or several seeds' from the settings alone.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from testbed.paths import user_path


@dataclass(frozen=True)
class Place:
    tracker: str   # its name: tensorboard, mlflow, wandb
    start: str     # what the start line says after "<tracker>: "
    end: str       # what the end line says

    def line(self, when: str) -> str:
        return f"{self.tracker}: {self.start if when == 'start' else self.end}"


@dataclass(frozen=True)
class TrackedGroup:
    """Runs tracked together, a sweep's or several seeds': what their lines name, before any of them starts."""
    folder: Path      # the folder holding their run folders: <out>/<scenario>
    runs: str         # their run folders under it, as a shell glob: "*/*" (a sweep's <combination>/<seed>), "*"
    count: int        # how many runs start
    out: Path         # --out: where what the runs share is kept (MLflow's store)
    group: str | None  # a sweep's name (its runs' group), else None


def logged(place_start: str, place_end: str, opener: str) -> tuple[str, str]:
    """(start, end) texts for a tracker that can be watched live with `opener` (a command or a URL)."""
    return f"{place_start}; watch: {opener}", f"{place_end}; open: {opener}"


def shown(path: str | Path) -> str:
    """A path as the lines show it: relative to the current folder where it lies under it, else whole."""
    return user_path(Path(path).expanduser().absolute())


def argument(path: str | Path, glob: str = "") -> str:
    """A path as one shell argument (quoted where it must be), `glob` (*, offline-run-*) added unquoted after it, so
    that the shell expands it."""
    return shlex.quote(shown(path)) + (f"/{glob}" if glob else "")


def uri_argument(uri: str) -> str:
    """A URI as one shell argument; a sqlite:/// one with its file shown as `shown` shows paths
    (sqlite:///runs/mlflow.db)."""
    prefix = "sqlite:///"
    return shlex.quote(prefix + shown(uri[len(prefix):]) if uri.startswith(prefix) else uri)
