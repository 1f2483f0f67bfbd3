"""One scenario from a validated Scenario to a finished run folder: what `testbed run` and `testbed sweep` share.

A run that fails keeps its rounds: its summary.json says how it ended (failed, interrupted, crashed).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from testbed import scenario as sc
from testbed.errors import TestbedError, write_crash_log
from testbed.provenance import made_with


@dataclass(frozen=True)
class Watch:
    """Who watches a run besides its folder: the on_round callbacks (testbed/hooks.py; in this process only), the
    trackers (`--track` specs, testbed/trackers/) with the sweep the run belongs to (its trackers' group), and
    `report`, which writes the run's report into its folder before the trackers keep their artifacts (the files
    written)."""

    on_round: tuple = ()
    track: tuple[str, ...] = ()
    group: str | None = None
    report: Callable[[Path], list[Path]] | None = None


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
    from tqdm.auto import tqdm  # a notebook gets its own widget, a terminal the text bar

    from testbed import checkpoint
    from testbed.engine import Engine
    from testbed.resources import Resources
    from testbed.degenerate import degenerate_warning, ended_early
    from testbed.hooks import asker, table_row
    from testbed.runlog import RunWriter, resolved, run_folder, tables

    try:
        exp = sc.build(scenario)
        resources = Resources(exp)  # a fleet where the task fits no device is refused before the folder is made
    except TestbedError as err:  # found while loading data or sizing the task: name the scenario, as validation does
        raise type(err)(f"{source}: {err}") from err.__cause__   # a PluginError stays one, its cause chained
    start = checkpoint.load(run_folder(out, scenario), resolved(scenario)) if resume else None
    writer = RunWriter(out, exp, start)
    if writer.dropped:  # rows of rounds after the checkpoint (and a torn one), which the run plays again
        print(f"resume: dropped {', '.join(writer.dropped)} of {writer.path}, past the checkpoint at round "
              f"{start.round}: the run plays those rounds again", file=sys.stderr)
    kept = kept_rows(writer.path) if start else []   # a resumed run's rows: the bar's and trackers' totals go on
    uplink = resumed_uplink(kept)
    columns = tables(scenario)["rounds.csv"]
    trackers = _trackers(watch, scenario, writer)
    with tqdm(total=scenario.stop.max_rounds, initial=start.round if start else 0, unit="round",
              desc=scenario.name, disable=quiet) as bar:
        def on_round(record: dict, events: list[dict]) -> None:
            nonlocal uplink
            writer.round(record, events)
            uplink += record["bytes_up"]
            bar.update(1)
            acc = record["accuracy"]
            bar.set_postfix_str(f"sim {record['t_end_s']:.0f}s acc {'-' if acc != acc else f'{acc:.3f}'} "
                                f"up {uplink / 1e6:.1f}MB")
            if trackers is not None:
                trackers.log(table_row(record, columns))

        try:
            if trackers is not None:   # a tracker that cannot start stops the run before round 1
                trackers.start(kept)
            writer.facts |= resources.facts() | {"torch_threads": threads,
                                                      "made_with": made_with(scenario.executor.device)}
            engine = Engine(exp, on_round, writer.checkpoint, start, resources, asker(watch.on_round, columns))
            engine.run()
            if engine.kit.ran_out_at is not None:  # no device could train again: said, not silent
                writer.facts |= ended_early(scenario, exp.fleet.availability, engine.kit.ran_out_at,
                                            engine.kit.first_usable_s)
            if engine.kit.contracts.no_task:  # the plugins that handed out no task in a round (degenerate.py)
                writer.facts["no_task_from"] = engine.kit.contracts.no_task
            if engine.kit.stop_reason is not None:
                writer.facts["stop_reason"] = engine.kit.stop_reason
        except TestbedError as err:
            writer.close(status=f"failed: {err}")
            _close(trackers, f"failed: {err}")
            raise type(err)(str(err) if writer.lost else f"{err} (rounds so far kept in {writer.path})") \
                from err.__cause__   # a callback's or plugin's own exception stays chained; a PluginError one
        except BaseException as err:  # Ctrl-C or a crash: keep what was written and say so, then let it through
            crashed = not isinstance(err, (KeyboardInterrupt, OSError))
            if crashed:  # a bug: its traceback in the run folder, for the report (cli.main names the file)
                err.log_file = write_crash_log(err, writer.path)
                plugin = plugin_crash(err)
                if plugin is not None:  # user code raised: their bug, a PluginError, the run closed as failed
                    writer.close(status=f"failed: {plugin}")
                    _close(trackers, f"failed: {plugin}")
                    raise plugin from err
            status = "interrupted" if isinstance(err, KeyboardInterrupt) else \
                f"{'crashed' if crashed else 'failed'}: {type(err).__name__}: {err}"
            try:
                writer.close(status=status)
            except OSError:  # the folder went away or the disk is full: the error itself says what happened
                pass
            _close(trackers, status)
            raise
    summary = writer.close()
    if trackers is not None or watch.report is not None:
        written = watch.report(writer.path) if watch.report is not None else []
        if trackers is not None:
            trackers.finish(summary, [writer.path / name for name in KEPT if (writer.path / name).is_file()]
                            + list(written))
    warning = degenerate_warning(summary, scenario)
    if warning:
        print(warning, file=sys.stderr)
    return writer.path, summary


KEPT = ("scenario.resolved.yaml", "summary.json", "rounds.csv", "events.csv", "devices.csv")  # trackers' artifacts


def plugin_crash(err: BaseException):
    """A PluginError for `err` where code a scenario named (not the testbed's) raised it: one line naming that
    code's file, line and function, and where its traceback is (err.log_file); None where the testbed raised."""
    from testbed import plugins
    from testbed.errors import PluginError

    where = plugins.culprit(err)
    if where is None:
        return None
    log = getattr(err, "log_file", None)
    return PluginError(f"the plugin code at {where} raised {type(err).__name__}: {' '.join(str(err).split())}; fix "
                       f"it there (traceback in {log}; --debug shows it here)")


def _trackers(watch: Watch, scenario: sc.Scenario, writer):
    """The run's trackers (testbed/trackers/), not yet started; None where it has none."""
    if not watch.track:
        return None
    from testbed.trackers import TrackedRun, Trackers

    return Trackers(list(watch.track), TrackedRun(f"{scenario.name}/{scenario.seed}", watch.group, scenario.name,
                                                  scenario.model_dump(mode="json"), writer.path))


def _close(trackers, status: str) -> None:
    """Close the trackers of a run that did not complete, where it has some (never raising over its error)."""
    if trackers is not None:
        trackers.close(status)


def kept_rows(run: Path) -> list[dict]:
    """The rows a resumed run keeps (rounds.csv, cut back to its checkpoint)."""
    import pandas as pd

    return pd.read_csv(run / "rounds.csv").to_dict("records")


def resumed_uplink(kept: list[dict]) -> int:
    """The uplink bytes of the rounds a resumed run keeps."""
    return int(sum(row["bytes_up"] for row in kept))
