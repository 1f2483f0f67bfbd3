"""Run tracking: a run's rounds, resolved scenario, summary and files shown in TensorBoard, MLflow or Weights & Biases
(`--track NAME[=TARGET]`, `track=[...]` in the Python API). The run folder stays the record; a tracker is a view of it.

- check(specs): before anything runs, each spec's name and library, or a TestbedError in one line.
- Trackers(specs, run): start() before round 1 (a tracker that cannot start: TestbedError in one line, the ones
  started before it closed as failed); log(row) after each round; finish(summary, files) at the end, or
  close(status) where the run failed or was interrupted.
- Each round's row is logged with its round as the step, the simulated time (`sim_time_s`: the row's t_end_s, under
  that name) beside it for the time axis, and the running totals bytes_up_total, bytes_down_total, flops_total (energy_J_total where
  the row has energy_J); a NaN (not evaluated this round) is left out, never logged. What each backend writes where:
  its module's docstring (tensorboard.py, mlflow.py, wandb.py).
- A tracker that raises in log() or finish() warns once on stderr in one line naming it and is dropped: the run
  goes on. close() never raises: the run's own error is what the user must see.
- Where a run is kept: start(say=...) hands `say` one line a tracker naming where it logs and the command that
  opens it, and finish() and close() one line each again at the end (places.py); a sweep's or several seeds' runs
  are said together (say_group), before the first starts and after the last ends.

No tracker library is imported here: each backend imports its own when it starts.
"""
from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from testbed.errors import TestbedError
from testbed.trackers.places import Place, TrackedGroup

# name -> (module of its backend, class, the libraries it needs: checked without importing them)
BACKENDS = {"tensorboard": ("testbed.trackers.tensorboard", "TensorBoardTracker", ("tensorboard",)),
            "mlflow": ("testbed.trackers.mlflow", "MlflowTracker", ("mlflow",)),
            "wandb": ("testbed.trackers.wandb", "WandbTracker", ("wandb",))}
TARGETS = {"tensorboard": "LOGDIR", "mlflow": "TRACKING_URI", "wandb": "PROJECT"}
# The rows' columns summed into running totals (NAME_total), for accuracy against bytes, FLOPs or energy spent.
TOTALS = ("bytes_up", "bytes_down", "flops", "energy_J")


@dataclass(frozen=True)
class TrackedRun:
    name: str            # the run's name in the tracker: "quickstart/0" (scenario/seed), a sweep's "sweep-fedavg/0"
    group: str | None    # a sweep's name (its runs are one group / experiment), else None: the scenario's name is
    scenario: str        # the scenario's name
    params: dict         # the resolved scenario, model_dump(mode="json")
    folder: Path         # the run folder
    out: Path            # --out, the run folders' root: where a store the runs share goes (MLflow's mlflow.db)

    @property
    def experiment(self) -> str:
        """The runs' experiment (MLflow) / group: the sweep's name, else the scenario's."""
        return self.group or self.scenario


def parse(spec: str) -> tuple[str, str | None]:
    """"name" or "name=target" -> (name, target or None); an unknown name or an empty target: TestbedError."""
    name, sep, target = spec.strip().partition("=")
    name = name.strip().lower()
    if name not in BACKENDS:
        raise TestbedError(f"--track {spec}: unknown tracker; use tensorboard, mlflow or wandb, each optionally "
                           f"=TARGET (tensorboard=LOGDIR, mlflow=TRACKING_URI, wandb=PROJECT)")
    if sep and not target.strip():
        raise TestbedError(f"--track {spec}: empty target; give --track {name}={TARGETS[name]} or --track {name}")
    return name, target.strip() or None


def install_hint(name: str) -> str:
    return f'pip install -e ".[{name}]"'


def check(specs: Iterable[str]) -> list[str]:
    """The specs as given, once each name and its library are known good; else a TestbedError in one line.
    Finds the libraries without importing them (importing mlflow or wandb takes a second)."""
    specs = list(specs)
    seen = set()
    for spec in specs:
        name, _ = parse(spec)
        if name in seen:
            raise TestbedError(f"--track {name} is given twice; give each tracker once")
        seen.add(name)
        for library in BACKENDS[name][2]:
            if not installed(library):
                raise TestbedError(f"--track {name}: {library} is not installed; {install_hint(name)}")
    return specs


def installed(library: str) -> bool:
    try:
        return importlib.util.find_spec(library) is not None
    except (ImportError, ValueError):  # a parent package that fails to import, or a module without a spec
        return False


def metrics(row: dict, totals: dict[str, float]) -> dict[str, float]:
    """One round's metrics: the row's numbers but its round (the step) and NaNs, its t_end_s as sim_time_s (the
    time axis, one name in every tracker), and the running totals, which `totals` carries from round to round."""
    out = {"sim_time_s": float(row["t_end_s"])}
    for key, value in row.items():
        if key in ("round", "t_end_s") or value is None or isinstance(value, (str, bytes)):
            continue
        value = float(value)
        if not math.isnan(value):
            out[key] = value
    for key in TOTALS:
        if key in out:
            totals[key] = totals.get(key, 0.0) + out[key]
            out[f"{key}_total"] = totals[key]
    return out


def one_line(err: BaseException) -> str:
    """An exception as one short line: its type and its message's lines joined (a pydantic error's detail is on
    its later lines), cut at 240 characters."""
    text = "; ".join(line.strip() for line in str(err).splitlines() if line.strip())
    text = text if len(text) <= 240 else text[:237] + "..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class Trackers:
    """The run's trackers, opened together; see the module's docstring."""

    def __init__(self, specs: Iterable[str], run: TrackedRun):
        self.run = run
        self.specs = check(specs)
        self.live: list = []       # the started trackers that have not failed
        self.totals: dict[str, float] = {}
        self.places: list[Place] = []   # where the started trackers keep the run, said at its start and end
        self.say: Callable[[str], None] | None = None

    def start(self, earlier_rows: Iterable[dict] = (), say: Callable[[str], None] | None = None) -> None:
        """Start each tracker, in the order given, then say where each keeps the run (a line each to `say`, again
        at the end). earlier_rows: a resumed run's rows before its checkpoint, counted into the running totals (not
        logged again), so that bytes_up_total goes on where it stopped."""
        for row in earlier_rows:
            metrics(row, self.totals)
        for spec in self.specs:
            name, target = parse(spec)
            module, cls, _ = BACKENDS[name]
            tracker = None
            try:
                tracker = getattr(importlib.import_module(module), cls)(spec, target, self.run)
                tracker.start()
            except Exception as err:
                self._abandon(spec, tracker)
                if isinstance(err, TestbedError):
                    raise TestbedError(str(err)) from None
                if isinstance(err, ImportError):
                    raise TestbedError(f"--track {spec}: could not import {err.name or name} ({one_line(err)}); "
                                       f"{install_hint(name)}") from None
                raise TestbedError(f"--track {spec}: could not start ({one_line(err)}); "  # the library's words
                                   f"{tracker.fix if tracker else 'check the target'}") from None
            self.live.append(tracker)
        self.places, self.say = [tracker.place() for tracker in self.live], say
        self._say("start")

    def _say(self, when: str) -> None:
        for place in self.places if self.say is not None else ():
            self.say(place.line(when))

    def _abandon(self, spec: str, tracker) -> None:
        """`spec` failed to start: it (where it got half way) and the trackers started before it are closed as
        failed, so that none is left open."""
        if tracker is not None:
            self.live.append(tracker)
        self.close(f"failed: --track {spec} could not start")

    def log(self, row: dict) -> None:
        step = int(row["round"])
        values = metrics(row, self.totals)
        self._each("log", lambda t: t.log(step, values), f"round {step}")

    def finish(self, summary: dict, files: Iterable[Path] = ()) -> None:
        files = [Path(f) for f in files if Path(f).is_file()]
        self._each("finish", lambda t: t.finish(summary, files), "the end")
        self.live = []
        self._say("end")

    def close(self, status: str) -> None:
        """The run failed ("failed: ...", "crashed: ...") or was interrupted ("interrupted"): each tracker marks it
        so where it has a notion of it, and is closed. Never raises."""
        self._each("close", lambda t: t.close(status), "closing")
        self.live = []
        try:
            self._say("end")   # the rounds logged before the run stopped are there
        except Exception:  # the terminal is gone (a closed pipe): the run's own error matters more
            pass

    def _each(self, what: str, call, when: str) -> None:
        kept = []
        for tracker in self.live:
            try:
                call(tracker)
            except Exception as err:  # a view failing must not stop the run: said once, then left out
                after = "the run goes on, its folder keeps everything" if what == "log" else "the run folder has it all"
                print(f"--track {tracker.spec}: stopped at {when} ({one_line(err)}); {after}", file=sys.stderr)
                if what == "log":
                    try:
                        tracker.close(f"failed: {one_line(err)}")
                    except Exception:  # it is broken already: closing it is best effort
                        pass
                continue
            kept.append(tracker)
        self.live = kept


def say_group(specs: Iterable[str], group: TrackedGroup, when: str, quiet: bool = False) -> None:
    """Print a line a tracker naming where it keeps the runs of `group` (a sweep's, several seeds') and what opens
    them, at their start (when="start") or end ("end"); nothing where quiet or no run starts. Made from the specs
    and the settings alone: no tracker library is imported."""
    if quiet or group.count == 0:
        return
    for spec in specs:
        name, target = parse(spec)
        print(importlib.import_module(BACKENDS[name][0]).group_place(target, group).line(when), flush=True)
