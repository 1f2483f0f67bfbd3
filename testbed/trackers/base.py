"""What every tracker backend is: the calls Trackers makes, and the flattening of the resolved scenario and the
summary into dotted keys that they share.

A backend gets each round's metrics already made (testbed/trackers/__init__.py: the row's numbers but NaNs and the
round, sim_time_s, the running totals) and logs them with the round as the step; it never sees a NaN."""
from __future__ import annotations

import json
import math
from pathlib import Path

from testbed.trackers import TrackedRun
from testbed.trackers.places import Place


class Tracker:
    """One backend. start() opens it (raising where it cannot: Trackers turns that into one line); log(step,
    metrics) each round; finish(summary, files) at a run's end; close(status) where the run failed or was
    interrupted. close may come after a start that failed half way, so it checks what it has. place() says where
    a started one keeps the run (places.py)."""

    fix = "check the target"  # the last words of the line where start() fails with the library's own error

    def __init__(self, spec: str, target: str | None, run: TrackedRun):
        self.spec = spec        # as the user wrote it: errors and warnings name it
        self.target = target    # what came after "=", or None
        self.run = run
        self.last_step = 0      # the last round logged: the step of the summary's metrics where they have one

    def start(self) -> None:
        raise NotImplementedError

    def log(self, step: int, metrics: dict[str, float]) -> None:
        raise NotImplementedError

    def finish(self, summary: dict, files: list[Path]) -> None:
        raise NotImplementedError

    def close(self, status: str) -> None:
        raise NotImplementedError

    def place(self) -> Place:
        """Once started: where it keeps this run and what opens it (the lines the run prints)."""
        raise NotImplementedError


def killed(status: str) -> bool:
    """The run's status says it was interrupted (Ctrl-C), not that it failed."""
    return status.startswith("interrupted")


def flat(value, prefix: str = "", nulls: bool = False) -> dict[str, object]:
    """A nested dict as {dotted key: value}: lists holding dicts by index (fleet.groups.0.profile), other lists kept
    whole; empty dicts left out, and None unless `nulls` (a blank in a tracker's table reads as null; the run
    folder's scenario.resolved.yaml has them)."""
    out: dict[str, object] = {}
    items = (value.items() if isinstance(value, dict)
             else enumerate(value) if isinstance(value, list) and any(isinstance(v, dict) for v in value) else None)
    if items is None:
        if value is not None or nulls:
            out[prefix] = value
        return out
    for key, inner in items:
        out |= flat(inner, f"{prefix}.{key}" if prefix else str(key), nulls)
    return out


def text(value) -> str:
    """A parameter's value as text: strings as they are, anything else as JSON (true, 0.5, [1, 2])."""
    return value if isinstance(value, str) else json.dumps(value)


def number(value) -> float | None:
    """A finite number as a float (bools are not numbers here), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def split_summary(summary: dict) -> tuple[dict[str, float], dict[str, str]]:
    """summary.json flattened: its finite numbers (final_accuracy, time_to_accuracy_s.0.9, ...) and the rest as text
    (scenario, algorithm, status)."""
    numbers, texts = {}, {}
    for key, value in flat(summary).items():
        n = number(value)
        if n is not None:
            numbers[key] = n
        else:
            texts[key] = text(value)
    return numbers, texts


def relative(path: Path, folder: Path) -> str:
    """A file's name as kept by a tracker: its path under the run folder (plots/accuracy_vs_time.png), else its
    name."""
    try:
        return Path(path).resolve().relative_to(Path(folder).resolve()).as_posix()
    except ValueError:
        return Path(path).name
