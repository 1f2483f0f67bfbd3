"""One scenario from a validated Scenario to a finished run folder: what `testbed run` and `testbed sweep` share.

A run that fails keeps its rounds: its summary.json says how it ended (failed, interrupted, crashed).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from testbed import plugins
from testbed import scenario as sc
from testbed.errors import TestbedError, write_crash_log
from testbed.paths import user_path
from testbed.provenance import made_with


@dataclass(frozen=True)
class Watch:
    """Who watches a run besides its folder: the on_round callbacks (testbed/hooks.py; in this process only), the
    trackers (`--track` specs, testbed/trackers/) with the sweep the run belongs to (its trackers' group), and
    `report`, which writes the run's report into its folder before the trackers keep their artifacts (the files
    written). out: --out, where the run goes below it (a sweep's into <out>/<scenario>): what the runs there share
    goes there (MLflow's store). announce: the run says where its trackers keep it (unless quiet); a sweep's runs
    are said together by the sweep instead."""

    on_round: tuple = ()
    track: tuple[str, ...] = ()
    group: str | None = None
    report: Callable[[Path], list[Path]] | None = None
    out: Path | None = None
    announce: bool = True


def run_scenario(scenario: sc.Scenario, source: str, out: str | Path = "runs", quiet: bool = False,
                 resume: bool = False, watch: Watch = Watch()) -> tuple[Path, dict]:
    """Build and run `scenario` (read from `source`, named in errors) into out/<name>/<seed>/ with a progress
    bar; returns the run folder and its summary. A TestbedError in the run closes the folder as failed and
    is raised again naming it; Ctrl-C and crashes close it as interrupted / crashed and go through.
    resume: go on from the run folder's checkpoint (from round 1 where it has none). watch: callbacks, trackers
    and the report (Watch).
    The whole run computes on executor.threads torch threads where set (testbed/execution/threads.py)."""
    from testbed.execution.threads import torch_threads

    with torch_threads(scenario.executor.threads) as threads:
        return _run(scenario, source, out, quiet, resume, threads, watch)


def _run(scenario: sc.Scenario, source: str, out: str | Path, quiet: bool, resume: bool,
         threads: int, watch: Watch) -> tuple[Path, dict]:
    from testbed import checkpoint
    from testbed.degenerate import degenerate_warning, ending_facts
    from testbed.engine import Engine
    from testbed.hooks import asker
    from testbed.progress import Progress
    from testbed.runlog import RunWriter, resolved, run_folder, tables

    exp, resources = _built(scenario, source)
    start = checkpoint.load(run_folder(out, scenario), resolved(scenario)) if resume else None
    writer = RunWriter(out, exp, start)
    if writer.dropped:  # rows of rounds after the checkpoint (and a torn one), which the run plays again
        print(f"resume: dropped {', '.join(writer.dropped)} of {user_path(writer.path)}, past the checkpoint at round "
              f"{start.round}: the run plays those rounds again", file=sys.stderr)
    kept = kept_rows(writer.path) if start else []   # a resumed run's rows: the bar's and trackers' totals go on
    columns = tables(scenario)["rounds.csv"]
    trackers = _trackers(watch, scenario, writer, out)
    with Progress(scenario, start.round if start else 0, kept, quiet, writer.round, trackers, columns) as progress:
        try:
            if trackers is not None:   # a tracker that cannot start stops the run before round 1
                trackers.start(kept, progress.say if watch.announce else None)
            writer.facts |= resources.facts() | {"torch_threads": threads,
                                                 "made_with": made_with(scenario.executor.device)}
            engine = Engine(exp, progress.on_round, writer.checkpoint, start, resources,
                            asker(watch.on_round, columns))
            writer.facts |= ending_facts(engine.run(), scenario, exp.fleet.availability)
            summary = writer.close()
        except BaseException as err:
            raise _closed(err, writer, trackers, scenario)
    _finish(watch, writer.path, summary, trackers)
    warning = degenerate_warning(summary, scenario)
    if warning:
        print(warning, file=sys.stderr)
    return writer.path, summary


def _built(scenario: sc.Scenario, source: str):
    """The experiment and its device resources; an error found while loading data or sizing the task names the
    scenario, as validation does."""
    from testbed.resources import Resources
    from testbed.validation import named_after

    with named_after(scenario, source):   # user code that crashed while built: a PluginError naming it
        exp = sc.build(scenario)
        return exp, Resources(exp)  # a fleet where the task fits no device is refused before the folder is made


def _closed(err: BaseException, writer, trackers, scenario: sc.Scenario) -> BaseException:
    """The run folder (and trackers) closed after `err` stopped the run; what to raise: a TestbedError naming
    where the rounds are kept, a PluginError where user code crashed, else `err` itself (Ctrl-C, a disk error,
    a testbed bug, whose traceback goes into the run folder for the report)."""
    if isinstance(err, TestbedError):
        writer.close(status=f"failed: {err}")
        _close(trackers, f"failed: {err}")
        said = type(err)(str(err) if writer.lost else f"{err} (rounds so far kept in {user_path(writer.path)})")
        said.__cause__ = err.__cause__   # a callback's or plugin's own exception stays chained; a PluginError one
        return said
    crashed = not isinstance(err, (KeyboardInterrupt, OSError))
    if crashed:  # a bug: its traceback in the run folder, for the report (cli.main names the file)
        err.log_file = write_crash_log(err, writer.path)
        plugin = plugins.crash(err, scenario.model_dump())
        if plugin is not None:  # user code raised: their bug, a PluginError, the run closed as failed
            writer.close(status=f"failed: {plugin}")
            _close(trackers, f"failed: {plugin}")
            plugin.__cause__ = err
            return plugin
    status = "interrupted" if isinstance(err, KeyboardInterrupt) else \
        f"{'crashed' if crashed else 'failed'}: {type(err).__name__}: {err}"
    try:
        writer.close(status=status)
    except OSError:  # the folder went away or the disk is full: the error itself says what happened
        pass
    _close(trackers, status)
    return err


def _finish(watch: Watch, path: Path, summary: dict, trackers) -> None:
    """A completed run's report (where asked), then its trackers keep the run's files and the report's."""
    if trackers is None and watch.report is None:
        return
    written = watch.report(path) if watch.report is not None else []
    if trackers is not None:
        trackers.finish(summary, [path / name for name in ARTIFACTS if (path / name).is_file()] + list(written))


ARTIFACTS = ("scenario.resolved.yaml", "summary.json", "rounds.csv", "events.csv", "devices.csv")  # trackers' artifacts


def _trackers(watch: Watch, scenario: sc.Scenario, writer, out: str | Path):
    """The run's trackers (testbed/trackers/), not yet started; None where it has none."""
    if not watch.track:
        return None
    from testbed.trackers import TrackedRun, Trackers

    return Trackers(list(watch.track), TrackedRun(f"{scenario.name}/{scenario.seed}", watch.group, scenario.name,
                                                  scenario.model_dump(mode="json"), writer.path,
                                                  Path(watch.out if watch.out is not None else out)))


def _close(trackers, status: str) -> None:
    """Close the trackers of a run that did not complete, where it has some (never raising over its error)."""
    if trackers is not None:
        trackers.close(status)


def kept_rows(run: Path) -> list[dict]:
    """The rows a resumed run keeps (rounds.csv, cut back to its checkpoint)."""
    import pandas as pd

    return pd.read_csv(run / "rounds.csv").to_dict("records")

