"""The Python API: `testbed run | validate | sweep | report | compare` as functions, for notebooks and scripts.
The command line (testbed/cli.py) only turns its flags into these calls and prints what they return, so both
behave the same; the parameters are named after the flags.

    import testbed
    run = testbed.run("scenarios/quickstart.yaml", set={"stop.max_rounds": 5}, out="/tmp/runs", quiet=True)
    run.rounds.plot(x="t_end_s", y="accuracy")

Semantics:
- A scenario is a file's path (str or Path; relative paths in it resolve against its folder), a dict (validated
  as a file is; relative paths resolve against the current directory) or a validated `Scenario`. `set`
  overrides fields as --set does: a dict {"stop.max_rounds": 5} of Python values, or --set's "path=value"
  strings, whose values are YAML.
- `run` and `load_run` give a Run: the run folder's tables as DataFrames, its summary and its scenario. Reading a
  run folder runs none of its code: the scenario comes back as the YAML it is (a dict, never validated, since
  validating imports the plugins it names, "package.module:attribute"), and `report` and `compare` read folders
  the same way; a run folder received from someone else is safe to open.
- Bad input raises TestbedError, one line naming the field or file and the fix, never SystemExit. The progress
  bar is tqdm.auto's: a widget in Jupyter.
pandas, torch and the analysis are imported where used, not here: `testbed validate` of a bad file stays fast,
and load_run, report and compare never import torch.
"""
from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass, replace
from os.path import commonpath
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Union

from testbed.errors import TestbedError, with_article
from testbed.paths import user_path

if TYPE_CHECKING:
    import pandas as pd

    from testbed.scenario import Scenario

ScenarioLike = Union[str, Path, dict, "Scenario"]
Overrides = Union[dict, Iterable[str], str]     # {"a.b": value} or ["a.b=value", ...]
RunFolders = Union[str, Path, "Run", Iterable[Union[str, Path, "Run"]]]
OnRound = Union[Callable[[dict], object], Iterable[Callable[[dict], object]]]   # testbed/hooks.py
Tracks = Union[str, Iterable[str]]              # "mlflow" or ["tensorboard", "mlflow=http://host:5000"]


@dataclass(frozen=True, eq=False)
class Report:
    """What report, compare or a run wrote as its report: the text the command line prints, the files written
    (figures, csv tables, pages), and the csv tables among them read back as DataFrames by file stem ('tta',
    'compare', 'tta_by_scenario')."""

    text: str
    files: tuple[Path, ...]
    tables: dict[str, pd.DataFrame]

    def __repr__(self) -> str:
        folder = commonpath([str(f.parent) for f in self.files]) if self.files else "-"
        return f"Report({len(self.files)} files in {folder}; tables: {', '.join(self.tables) or 'none'})"


@dataclass(frozen=True, eq=False)
class Run:
    """A run folder read back: what `testbed run` writes into out/<scenario>/<seed>/ (README, "What a run
    writes"). `summary` is a dict, as summary.json holds it, not a Series: its per-target entries are maps
    ({"0.9": seconds or None}) and its status is text, which a Series would flatten into one column of mixed
    objects; `pd.Series(run.summary)` where a Series is wanted."""

    path: Path
    scenario: dict               # scenario.resolved.yaml, read as YAML and never validated (see the docstring)
    summary: dict                # summary.json; rebuilt from rounds.csv where the run stopped before writing it
    rounds: pd.DataFrame         # rounds.csv: one row per round (per aggregation, asynchronous)
    events: pd.DataFrame         # events.csv: one row per device phase
    devices: pd.DataFrame        # devices.csv: one row per device; empty where the folder has none
    battery: pd.DataFrame | None = None   # battery.csv, where some device group has a battery
    report: Report | None = None          # the report run() wrote with the run; None from load_run
    done_before: bool = False             # run() found this scenario's completed run there: ran and rewrote nothing

    def __repr__(self) -> str:
        s, summary = self.scenario, self.summary
        algorithm = s.get("algorithm")
        accuracy = summary.get("final_accuracy")
        return (f"Run({self.path}: {algorithm.get('name') if isinstance(algorithm, dict) else algorithm} on "
                f"{s.get('name')}, seed {s.get('seed')}, {summary.get('rounds', len(self.rounds))} rounds, "
                f"{summary.get('status', 'no status')}, final accuracy "
                f"{'-' if accuracy is None else format(accuracy, '.3f')})")


class RunsFailed(TestbedError):
    """Some of several runs did not complete: the message says which; `runs` holds those that did."""

    def __init__(self, message: str, runs: list[Run]):
        super().__init__(message)
        self.runs = runs


def validate(scenario: ScenarioLike, *, set: Overrides = (), seed: int | None = None) -> Scenario:
    """The scenario validated, with `set` and `seed` applied (`testbed validate`)."""
    return _validated(scenario, set, seed)[0]


def run(scenario: ScenarioLike, *, set: Overrides = (), seed: int | None = None, seeds: Iterable[int] | None = None,
        out: str | Path = "runs", quiet: bool = False, resume: bool = False, overwrite: bool = False,
        plots: bool = True, jobs: int = 1, ray: str | None = None, on_round: OnRound = (),
        track: Tracks = ()) -> Run | list[Run]:
    """Run the scenario into out/<name>/<seed>/ and read the folder back (`testbed run`). plots: write its
    report (the time-to-accuracy table tta.csv and the figures) into the folder's plots/, as the command line
    does. quiet: no progress bar. resume: go on from the folder's checkpoint (from round 1 where it has none).
    A folder that already holds a run is never replaced silently: this scenario's completed run is read back as
    it is, said in a line (done_before, no report, nothing rewritten); another scenario's run, or this one's
    unfinished run, is refused unless resume (the same scenario) or overwrite (the folder is deleted first). A
    run that fails raises TestbedError; its folder keeps the rounds it did and says how it ended.
    seeds: one run per seed, `jobs` at a time in local processes or as Ray tasks at the address `ray` ('local'
    starts Ray here), with a line as each ends instead of progress bars, and one report over them in
    out/<name>/plots/; returns their Runs in the seeds' order, each holding that report, or raises RunsFailed,
    which holds those that completed.
    on_round: a function of a round's row (or several), called each round before the row is written; it returns
    None to go on, True or a reason (a str) to end the run after this round (testbed/hooks.py). In this process
    only: not with jobs > 1 or ray. track: trackers the run is logged to as it goes, 'tensorboard', 'mlflow',
    'wandb', each optionally '=TARGET' (a log folder, a tracking URI, a project; testbed/trackers/); unless quiet,
    a line each says where it keeps the run and what opens it, at the start and at the end (several seeds' runs
    together)."""
    from testbed.hooks import checked
    from testbed.runner import Watch

    if resume and overwrite:
        raise TestbedError("resume and overwrite: give one of them (resume goes on with a run, overwrite replaces it)")
    callbacks, track = checked(on_round), _tracks(track)
    if callbacks and (jobs > 1 or ray is not None):
        raise TestbedError("on_round: its functions run in this process; run the seeds with jobs=1 and no ray")
    if seeds is not None:
        return _run_seeds(scenario, set, seed, list(seeds), out, resume, overwrite, plots, jobs, ray,
                          Watch(callbacks, track), quiet)
    if jobs > 1 or ray is not None:
        raise TestbedError("jobs and ray run several seeds at once: give seeds too, e.g. seeds=[0, 1, 2]")
    from testbed.runner import run_scenario

    validated, source = _validated(scenario, set, seed)
    if _done_before([validated], out, resume, overwrite):
        return replace(load_run(_folder_of(validated, out)), done_before=True)
    written: list[Report] = []

    def report(folder: Path) -> list[Path]:   # before the trackers finish: the figures are their artifacts
        if track:   # report.html too, for the trackers that keep files (report's pages: compare's files beside)
            from analysis.pages import write_pages

            with _analysis_errors():
                written.append(_report(*write_pages([folder], folder / "plots")))
        else:
            written.append(_write_report([folder], folder / "plots"))
        return list(written[0].files)

    folder, _ = run_scenario(validated, source, out, quiet, resume, Watch(callbacks, track,
                                                                          report=report if plots else None))
    return replace(load_run(folder), report=written[0] if written else None)


def _tracks(track: Tracks) -> tuple[str, ...]:
    """The tracker specs, checked before anything runs (a name we do not know, a library not installed)."""
    track = (track,) if isinstance(track, str) else tuple(track or ())
    if track:
        from testbed.trackers import check

        check(list(track))
    return track


def _folder_of(scenario: Scenario, out: str | Path) -> Path:
    from testbed.runlog import run_folder

    return run_folder(out, scenario)


def _done_before(scenarios: list[Scenario], out: str | Path, resume: bool, overwrite: bool) -> set[int]:
    """The seeds of the scenarios whose run folder holds their completed run already, each said in one line; every
    folder is claimed (runlog.claim) before a line is said, so that one refused leaves them all as they were."""
    from testbed.runlog import claim

    done = {s.seed: _folder_of(s, out) for s in scenarios if claim(_folder_of(s, out), s, resume, overwrite)}
    for folder in done.values():   # within 100 columns for a default run folder, runs/<scenario>/<seed>
        print(f"{user_path(folder)}: holds this scenario's completed run; nothing rerun (--overwrite runs it again)")
    return set(done)


def _run_seeds(scenario: ScenarioLike, overrides: Overrides, seed: int | None, seeds: list[int], out: str | Path,
               resume: bool, overwrite: bool, plots: bool, jobs: int, ray: str | None, watch,
               quiet: bool) -> list[Run]:
    from testbed.parallel import Job, progress_printer, run_jobs
    from testbed.trackers import TrackedGroup, say_group

    if seed is not None:
        raise TestbedError("seed and seeds: give one of them")
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice or not seeds:
        raise TestbedError(f"seeds: {twice[0]} is listed twice" if twice else "seeds: empty; list at least one")
    validated = [_validated(scenario, overrides, s) for s in seeds]
    done = _done_before([s for s, _ in validated], out, resume, overwrite)
    todo = [(s, source) for s, source in validated if s.seed not in done]
    tracked = TrackedGroup(_folder_of(validated[0][0], out).parent, "*", len(todo), Path(out), None)
    say_group(watch.track, tracked, "start", quiet)   # the runs, quiet, say nothing themselves
    outcomes = run_jobs([Job(s, f"{source} (seed {s.seed})", Path(out), resume, f"seed {s.seed}", watch)
                         for s, source in todo], jobs, ray, progress_printer(len(todo))) if todo else []
    completed = {o.job.scenario.seed for o in outcomes if o.error is None} | done
    kept = [s for s, _ in validated if s.seed in completed]  # in the seeds' order
    folders = [_folder_of(s, out) for s in kept]
    written = _write_report(folders, folders[0].parent / "plots") if folders and plots else None
    runs = [replace(load_run(folder), report=written, done_before=s.seed in done) for s, folder in zip(kept, folders)]
    say_group(watch.track, tracked, "end", quiet)
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        raise RunsFailed(f"{len(failed)} of {len(outcomes)} runs did not complete "
                         f"({', '.join(o.job.label for o in failed)}); their folders say how they ended", runs)
    return runs


def sweep(scenario: ScenarioLike, grid: dict[str, Iterable] | Iterable[str], *, set: Overrides = (),
          out: str | Path = "runs", quiet: bool = False, jobs: int = 1, ray: str | None = None,
          track: Tracks = ()) -> pd.DataFrame:
    """Run every combination of the grid (`testbed sweep`): {"algorithm": ["fedavg", "fedlps"], "seed": [0, 1]}
    (or --grid's "KEY=[V1,V2]" strings), each into out/<name>/<name>-<values>/<seed>/, skipping those completed
    before; prints a line per run and the index. Returns the index, out/<name>/sweep.csv: one row per
    combination with its grid values, folder and status. Raises TestbedError at the end where some run did not
    complete (the others still ran). track: as run's, each run one of the sweep's group (named by the sweep), the
    lines saying where for all its runs together."""
    from testbed import sweeps

    track = _tracks(track)
    if isinstance(grid, dict):
        axes = sweeps.grid_of([(key, list(values) if isinstance(values, (tuple, range)) else values,
                                f"grid {key!r}") for key, values in grid.items()])
    else:
        axes = sweeps.parse_grid([grid] if isinstance(grid, str) else list(grid))
    return sweeps.sweep(*_raw(scenario, set, None), axes, out, quiet, jobs, ray, track)


def load_run(folder: str | Path) -> Run:
    """A run folder read back; a missing folder, or a file that is not what the testbed writes, raises
    TestbedError naming it. Reads files only: no code of the run (its plugins) is imported."""
    from analysis.runs import devices_of, load_run as read_folder

    with _analysis_errors():
        found = read_folder(folder)
        return Run(found.path, found.scenario, found.summary, found.rounds, found.events, devices_of(found),
                   found.battery)


def report(runs: RunFolders, *, out: str | Path | None = None, targets: float | Iterable[float] | None = None,
           baseline: str | None = None, metric: str = "accuracy") -> Report:
    """`testbed report`: the time-to-accuracy tables and plots of the runs (run folders, Runs, or folders that
    hold runs at any depth, a sweep's and lone ones alike; what such a folder holds but cannot be reported is
    named in a line each at the text's start), compare's too, report.html and report.md, into out (default: the
    run's plots/ for one run, report/ for several). targets: accuracies (default: the scenarios'
    stop.target_accuracy, else 0.5, 0.8, 0.9); baseline: speedups against this algorithm or group; metric:
    'accuracy' or 'local_accuracy'."""
    from analysis.pages import write_pages

    folders = _folders(runs)
    out = Path(out) if out is not None else (folders[0] / "plots" if len(folders) == 1 else Path("report"))
    with _analysis_errors():
        text, written = write_pages(folders, out, _targets(targets), baseline, metric)
    return _report(text, written)


def compare(runs: RunFolders, *, out: str | Path | None = None, targets: float | Iterable[float] | None = None,
            baseline: str | None = None, metric: str = "accuracy", against: RunFolders | None = None) -> Report:
    """`testbed compare`: the runs grouped by everything but the seed, with the mean±std over seeds of the time,
    uplink and FLOPs to each target and speedups against `baseline`, into out/compare.csv (tables["compare"]),
    each metric's mean with its 95% interval and, against the baseline, the effect's interval and verdict, each
    metric on its scale (intervals.csv, analysis/verdicts.py, analysis/scales.py), and the comparison plots; out
    defaults to compare/ beside the runs (in the folder that holds them all, e.g. runs/quickstart/compare for
    runs/quickstart/0 and 1), not the current directory. `against`: the same runs made in another float summation
    order (e.g. --set executor.threads=2): whether each verdict holds there too (sensitivity.csv; needs a
    baseline). Parameters as report's, and as report's text, compare's starts with a line for each run it skipped;
    its every line fits 100 characters (analysis/compare_text.py)."""
    from analysis.compare import write_comparison
    from analysis.compare_text import compare_text
    from analysis.discovery import find_runs
    from analysis.origins import mixed_origins

    folders, targets = _folders(runs), _targets(targets)
    with _analysis_errors():
        found = find_runs(folders)
        other = None if against is None else find_runs(_folders(against))
        if out is None:
            out = Path(commonpath([Path(f).resolve().parent for f in found.folders])) / "compare"
        runs = found.runs()
        comparison, written = write_comparison(runs, out, targets, baseline, metric,
                                               against=None if other is None else other.runs())
    skipped = [*found.skipped, *(f"--against: {line}" for line in (other.skipped if other else []))]
    return _report(compare_text(comparison, metric, [*skipped, *mixed_origins(runs)]), written)


def _validated(scenario: ScenarioLike, overrides: Overrides, seed: int | None) -> tuple[Scenario, str]:
    """The scenario validated (the schema, then what its built selector answers: testbed/validation.py), and how
    errors name it (the file, or 'scenario'). A file is read (and its overrides applied) before the schema is
    imported; neither imports torch, which the run's modules do."""
    if _is_scenario(scenario) and not overrides and seed is None:
        return scenario, f"scenario {scenario.name}"
    raw, source, base_dir = _raw(scenario, overrides, seed)
    from testbed import validation

    return validation.validate(raw, source, base_dir), source


def _raw(scenario: ScenarioLike, overrides: Overrides, seed: int | None) -> tuple[dict, str, Path]:
    """The scenario as a dict with the overrides (then the seed) applied, how errors name it, and the folder its
    relative paths resolve against."""
    from testbed import scenario_file as sc  # reading alone: yaml, not the schema

    if isinstance(scenario, (str, Path)):
        raw, source, base_dir = sc.read_yaml(scenario), str(scenario), Path(scenario).parent
    elif isinstance(scenario, dict):
        raw, source, base_dir = copy.deepcopy(scenario), "scenario", Path(".")
    elif _is_scenario(scenario):
        raw, source, base_dir = scenario.model_dump(mode="json"), f"scenario {scenario.name}", Path(".")
    else:
        raise TestbedError(f"scenario: got {with_article(type(scenario).__name__)}; give a YAML file's path, a dict "
                           "or a testbed Scenario")
    if isinstance(overrides, dict):
        for key, value in overrides.items():
            sc.set_path(raw, key, value, f"set {key}")
    else:
        sc.apply_overrides(raw, [overrides] if isinstance(overrides, str) else list(overrides))
    if seed is not None:
        sc.set_path(raw, "seed", seed, "seed")
    return raw, source, base_dir


def _is_scenario(scenario) -> bool:
    """Whether it is a validated Scenario; a path or a dict is told apart without importing the schema."""
    if isinstance(scenario, (str, Path, dict)):
        return False
    from testbed.schema.scenario import Scenario

    return isinstance(scenario, Scenario)


def _folders(runs: RunFolders) -> list[Path]:
    """Run folders from paths and Runs, one or several."""
    many = [runs] if isinstance(runs, (str, Path, Run)) else list(runs)
    if not many:
        raise TestbedError("runs: none given; give run folders (or a sweep's folder)")
    return [r.path if isinstance(r, Run) else Path(r) for r in many]


def _targets(targets: float | Iterable[float] | None) -> list[float] | None:
    """The target accuracies as a list; one outside [0, 1] (90 for 90%) is refused naming it."""
    if targets is None:
        return None
    targets = [targets] if isinstance(targets, (int, float)) else list(targets)
    wrong = [t for t in targets if not 0 <= t <= 1]
    if wrong:
        raise TestbedError(f"target accuracy {wrong[0]!r} is outside [0, 1]; give it as a fraction, e.g. 0.9")
    return targets


def _write_report(folders: list[Path], out: Path) -> Report:
    """analysis.report.write_report's tables and plots of the runs, as `testbed run` writes them."""
    from analysis.report import write_report

    with _analysis_errors():
        return _report(*write_report(folders, out))


def _report(text: str, written: list[Path]) -> Report:
    import pandas as pd

    files = tuple(written)
    return Report(text, files, {f.stem: pd.read_csv(f) for f in files if f.suffix == ".csv"})


@contextmanager
def _analysis_errors():
    """What the analysis raises about the folders it reads, as one-line errors."""
    from analysis.compare import MissingBaseline, UnknownBaseline
    from analysis.report import MissingMetric
    from analysis.runs import DamagedRun

    try:
        yield
    except FileNotFoundError as err:
        raise TestbedError(str(err).strip("'\"")) from None
    except (DamagedRun, UnknownBaseline, MissingBaseline) as err:
        raise TestbedError(str(err)) from None
    except MissingMetric as err:
        raise TestbedError(f"{err} (or report on --metric accuracy)") from None
