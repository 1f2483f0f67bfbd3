"""`testbed run | validate | sweep | report | compare | calibrate | models`: the command line, a thin layer over the Python API
(testbed/api.py): it turns flags into API calls and prints what they return. Bad input ends in one line on stderr
and exit code 2."""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from testbed.errors import PluginError, TestbedError, write_crash_log
from testbed.paths import user_path

EXIT_BUG, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 1, 2, 130


def _run(args) -> None:
    from testbed import api

    if args.seeds is None and (args.jobs > 1 or args.ray):
        raise TestbedError("--jobs and --ray run several seeds at once: add --seeds, e.g. --seeds 0,1,2")
    if args.seeds is not None and args.seed is not None:
        raise TestbedError("--seed and --seeds: give one of them")
    try:
        result = api.run(args.file, set=args.set or [], seed=args.seed, seeds=args.seeds, out=args.out,
                         quiet=args.quiet, resume=args.resume, overwrite=args.overwrite, jobs=args.jobs, ray=args.ray,
                         track=args.track or ())
    except api.RunsFailed as err:
        _print_seeds(err.runs)
        raise
    if args.seeds is not None:
        return _print_seeds(result)
    if result.done_before:  # api.run said so in its one line
        return
    from analysis.terminal import wrap

    summary = result.summary
    said = [f"\nrun folder: {user_path(result.path)} ({_protocol(result.scenario)})",
            f"non-IID degree: {summary['non_iid_degree']:.3f} bits (mean JS divergence of each device's labels to "
            "all labels; devices.csv)"]   # one line of 98 columns
    if "server_samples" in summary:
        said.append(f"server data: {summary['server_samples']} samples, non-IID degree "
                    f"{summary['server_non_iid_degree']:.3f} (its labels against all device data's)")
    print(wrap("\n".join(said)))
    print(f"\n{result.report.text}" + _written(result.report.files, "plots"))


def _print_seeds(runs) -> None:
    """--seeds: the report over the runs that completed, and where their folders are."""
    if runs:
        scenario = runs[0].path.parent
        print(f"\n{runs[0].report.text}\n\nrun folders: {user_path(scenario)}/<seed>; plots: "
              f"{user_path(scenario / 'plots')}")


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of seeds; write e.g. 0,1,2") from None
    if len(set(seeds)) < len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r} lists a seed twice")
    return seeds


def _validate(args) -> None:
    from testbed import api

    for file in args.files:
        s = api.validate(file, set=args.set or [])
        print(f"{file}: ok ({s.algorithm.name} on {s.data.name}, {s.fleet.size} devices, "
              f"{_protocol(s.model_dump(mode='json'))})")


def _protocol(s: dict) -> str:
    """The protocol of a scenario (as its resolved YAML holds it) in a few words."""
    p = s["protocol"]
    if p["kind"] == "sync":
        return f"{s['round']['clients_per_round']} per round"
    if p["kind"] == "hierarchical":
        return (f"hierarchical: {p['edge_rounds']} edge rounds of {s['round']['clients_per_round']} per cell a "
                "cloud round")
    triggers = ([f"every {p['buffer_size']} updates"] if p.get("buffer_size") else []) + (
        [f"every {p['period_s']:g} s"] if p.get("period_s") else [])
    rule = f"FedAsync mixing {p['mixing']:g}" if p.get("mixing") else "FedBuff"
    unused = "; round: not used" if s.get("round") is not None else ""
    return f"async: {p['concurrency']} in flight, aggregating {' or '.join(triggers)} ({rule}{unused})"


def _report(args) -> None:
    from testbed import api

    # the folders as the user reads them: the lines the analysis writes name them (a run it skipped, a damaged one)
    report = api.report([user_path(p) for p in args.runs], out=args.out, targets=args.target,
                        baseline=args.baseline, metric=args.metric)
    print(report.text + _written(report.files))


def _compare(args) -> None:
    from testbed import api

    report = api.compare(args.runs, out=args.out, targets=args.target, baseline=args.baseline, metric=args.metric,
                         against=args.against)
    print(report.text + _written(report.files))


def _written(files, title: str = "written") -> str:
    """The files a command wrote, under `title`, a line each, as the user reads them (testbed/paths.py)."""
    return f"\n\n{title}:\n" + "\n".join(f"  {user_path(p)}" for p in files)


def _sweep(args) -> None:
    from testbed import api

    api.sweep(args.file, args.grid, set=args.set or [], out=args.out, quiet=args.quiet, jobs=args.jobs, ray=args.ray,
              track=args.track or ())


def _calibrate(args) -> None:
    from testbed import latency

    path = latency.calibrate(args.out, threads=args.threads, device=args.device, budget=args.budget,
                             name=args.name, quiet=args.quiet)
    print(f"wrote {path}\nin a scenario: fleet.catalog lists it; compute: latency (docs/latency.md)")


def _models(args) -> None:
    from testbed.models.summary import format_table

    print(format_table())
    print("\nforward_flops: multiply-adds for one sample, as fvcore and the papers count them; "
          "training costs 3x that per sample")


def _jobs(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of jobs; give a whole number >= 1")
    return int(text)


def _track_option(command) -> None:
    command.add_argument("--track", action="append", metavar="TRACKER[=TARGET]",
                         help="log each run's rounds to tensorboard[=LOGDIR], mlflow[=TRACKING_URI] or wandb[=PROJECT] "
                         "as it goes, saying where it keeps them at the start and the end (repeatable; each an extra: "
                         "pip install -e '.[mlflow]')")


def _parallel_options(command) -> None:
    command.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                         help="runs at once in N local worker processes, the cores split between them (default 1)")
    command.add_argument("--ray", metavar="ADDRESS", help="each run as a Ray task: a cluster's address, 'auto' "
                         "for the running cluster, or 'local' to start Ray here; --out must be a folder every node "
                         "sees")


class _OneLineErrors(argparse.ArgumentParser):
    """A bad flag ends as a bad scenario does: one line on stderr (not argparse's usage block) and exit code 2.
    Subcommand parsers are made of the same class."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    top = _OneLineErrors(prog="testbed", description="Federated learning on a simulated edge fleet: "
                                  "time-to-accuracy in simulated seconds, bytes and FLOPs.")
    sub = top.add_subparsers(dest="command", required=True)
    _run_command(sub)
    _validate_command(sub)
    _sweep_command(sub)
    _report_command(sub)
    _compare_command(sub)
    _calibrate_command(sub)
    _models_command(sub)
    top.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    for command in sub.choices.values():  # also after the command: testbed run x.yaml --debug
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return top


def _run_command(commands) -> None:
    run = commands.add_parser("run", help="run a scenario and write runs/<scenario>/<seed>/")
    run.add_argument("file")
    run.add_argument("--seed", type=int, help="override the scenario's seed")
    run.add_argument("--seeds", type=_seeds, metavar="S1,S2,...", help="one run per seed (with --jobs / --ray, "
                     "several at once), then one report over them")
    run.add_argument("--out", default="runs", help="root folder of run folders (default: runs)")
    run.add_argument("--set", action="append", metavar="KEY.PATH=VALUE", help="override a scenario field")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--resume", action="store_true", help="go on from the run folder's checkpoint after a crash "
                     "(from round 1 where it has none); without it or --overwrite, a run folder that holds another "
                     "run is refused, and one that holds this scenario's completed run is left as it is")
    run.add_argument("--overwrite", action="store_true", help="delete the run folder's run, if any, and run again")
    _parallel_options(run)
    _track_option(run)
    run.set_defaults(handler=_run)


def _validate_command(commands) -> None:
    val = commands.add_parser("validate", help="check scenario files without running them")
    val.add_argument("files", nargs="+")
    val.add_argument("--set", action="append", metavar="KEY.PATH=VALUE")
    val.set_defaults(handler=_validate)


def _sweep_command(commands) -> None:
    swp = commands.add_parser("sweep", help="run every combination of a grid of scenario fields into "
                         "OUT/<scenario>/<scenario>-<values>/<seed>/, skipping completed ones; index in "
                         "OUT/<scenario>/sweep.csv")
    swp.add_argument("file")
    swp.add_argument("--grid", action="append", required=True, metavar="KEY.PATH=[V1,V2,...]",
                     help="a field and its values (repeatable): algorithm=[fedavg,fedlps] (each algorithm with "
                     "its defaults), fleet.heterogeneity=[low,high], seed=[0,1,2], any --set path")
    swp.add_argument("--out", default="runs", help="root folder of run folders (default: runs)")
    swp.add_argument("--set", action="append", metavar="KEY.PATH=VALUE", help="override a field in every run")
    swp.add_argument("--quiet", action="store_true", help="no progress bars")
    _parallel_options(swp)
    _track_option(swp)
    swp.set_defaults(handler=_sweep)


def _report_command(commands) -> None:
    rep = commands.add_parser("report", help="time-to-accuracy tables and plots for run folders, compare's too, as "
                         "report.html (self-contained, sortable tables) and report.md")
    rep.add_argument("runs", nargs="+", help="run folders, or folders that hold runs (a sweep's "
                     "OUT/<scenario>, any folder of run folders): every run under them; a line names each one "
                     "skipped and why")
    rep.add_argument("--baseline", metavar="NAME", help="speedups against this algorithm or group (see compare)")
    rep.add_argument("--out", type=Path, help="folder for the plots (default: RUN/plots, or report/ for several)")
    rep.add_argument("--target", type=float, action="append", help="target accuracy (repeatable)")
    rep.add_argument("--metric", choices=["accuracy", "local_accuracy"], default="accuracy",
                     help="what the targets and accuracy plots are on: accuracy (global model, global test set; "
                     "default) or local_accuracy (mean over devices of each one's accuracy on its own test data, "
                     "as personalized FL papers report)")
    rep.set_defaults(handler=_report)


def _compare_command(commands) -> None:
    cmp = commands.add_parser("compare", help="runs grouped by everything but the seed: mean±std and 95%% intervals over "
                         "seeds of time, uplink and FLOPs to each target, speedups, verdicts against a baseline, and "
                         "comparison plots")
    cmp.add_argument("runs", nargs="+", help="run folders, or folders that hold runs (a sweep's "
                     "OUT/<scenario>, any folder of run folders): every run under them; a line names each one "
                     "skipped and why")
    cmp.add_argument("--baseline", metavar="NAME", help="speedup against this algorithm under the same other "
                     "settings, or against this group label")
    cmp.add_argument("--out", type=Path, help="folder for compare.csv and the plots (default: compare/ beside the "
                     "runs, in the folder that holds them all)")
    cmp.add_argument("--target", type=float, action="append", help="target accuracy (repeatable)")
    cmp.add_argument("--metric", choices=["accuracy", "local_accuracy"], default="accuracy",
                     help="what the targets are on (see report)")
    cmp.add_argument("--against", action="append", metavar="RUN_DIR", help="the same runs made in another float "
                     "summation order (e.g. --set executor.threads=2 --out runs_threads2), a folder that holds them "
                     "(repeatable): whether each verdict against --baseline holds there too (sensitivity.csv)")
    cmp.set_defaults(handler=_compare)


def _calibrate_command(commands) -> None:
    cal = commands.add_parser("calibrate", help="measure this machine's training ops and write a device file for "
                         "compute: latency (docs/latency.md)")
    cal.add_argument("--out", required=True, help="the device file to write (.yaml)")
    cal.add_argument("--threads", type=_jobs, default=1, metavar="N", help="torch threads to measure (default 1)")
    cal.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="measure the CPU or the GPU")
    cal.add_argument("--budget", type=float, default=180.0, metavar="SECONDS",
                     help="seconds to spend measuring (default 180)")
    cal.add_argument("--name", help="the profile's name in the file (default calibrated_<host>)")
    cal.add_argument("--quiet", action="store_true", help="no progress bar")
    cal.set_defaults(handler=_calibrate)


def _models_command(commands) -> None:
    mod = commands.add_parser("models", help="every model with its parameters and forward FLOPs per sample")
    mod.set_defaults(handler=_models)


def main(argv: list[str] | None = None) -> int:
    """The one boundary of user errors: a TestbedError (bad input, named and with its fix) or an OSError (a path
    that cannot be read or written, a full disk) ends in one line and exit code 2; an unexpected error is a bug,
    said in one line with where its traceback was written (--debug: raised, traceback and all); SIGTERM stops a
    run as Ctrl-C does, tables kept and the run marked interrupted."""
    args = parser().parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        args.handler(args)
    except TestbedError as err:
        if getattr(args, "debug", False) and isinstance(err, PluginError) and err.__cause__ is not None:
            raise err.__cause__   # --debug: the plugin's own exception, its traceback shown
        print(f"error: {_one_line(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as err:
        if getattr(args, "debug", False):
            raise
        name = user_path(err.filename) if isinstance(err.filename, (str, Path)) else err.filename  # or bytes, an fd
        where = f"{name}: " if err.filename else ""
        print(f"error: {where}{_one_line(err.strerror or err)}; check the path and that it can be written",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted: the tables written so far are kept; --resume goes on", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # noqa: BLE001 - a bug: one line, the traceback in a file
        if getattr(args, "debug", False):
            raise
        log = user_path(getattr(err, "log_file", None) or write_crash_log(err))
        print(f"internal error ({type(err).__name__}: {_one_line(err)}): a bug in the testbed, not in your input; "
              f"traceback in {log}; please report it with that file on the project's issue tracker "
              "(--debug shows it here)", file=sys.stderr)
        return EXIT_BUG
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def _one_line(message) -> str:
    """A message as one line, whatever a library put in it (YAML's parser quotes the line it stopped at)."""
    return " ".join(str(message).split())


def _interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
