"""`testbed run | validate | report`: the command line. Bad input ends in one line on stderr and exit code 2."""
from __future__ import annotations

import argparse
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

from testbed import plugins
from testbed.errors import TestbedError, write_crash_log

EXIT_BUG, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 1, 2, 130


def _run(args) -> None:
    from analysis.report import write_report
    from testbed import scenario as sc
    from testbed.runner import run_scenario

    if args.seeds is not None:
        return _run_seeds(args)
    if args.jobs > 1 or args.ray:
        raise TestbedError("--jobs and --ray run several seeds at once: add --seeds, e.g. --seeds 0,1,2")
    overrides = list(args.set or []) + ([f"seed={args.seed}"] if args.seed is not None else [])
    scenario = sc.load(args.file, overrides)
    path, summary = run_scenario(scenario, args.file, args.out, args.quiet, args.resume)
    table, plots = write_report([path], path / "plots")
    print(f"\nrun folder: {path} ({_protocol(scenario)})")
    print(f"non-IID degree: {summary['non_iid_degree']:.3f} (mean JS divergence of the devices' labels to all "
          "labels, bits; per device in devices.csv)")
    if "server_samples" in summary:
        print(f"server data: {summary['server_samples']} samples, non-IID degree "
              f"{summary['server_non_iid_degree']:.3f} (its labels against all device data's)")
    print(f"\n{table}\n\nplots:")
    print("\n".join(f"  {p}" for p in plots))


def _run_seeds(args) -> None:
    """--seeds 0,1,2: one run per seed, --jobs at a time (or on Ray), then one report over them."""
    from analysis.report import write_report
    from testbed import scenario as sc
    from testbed.parallel import Job, progress_printer, run_jobs
    from testbed.runlog import run_folder

    if args.seed is not None:
        raise TestbedError("--seed and --seeds: give one of them")
    scenarios = [sc.load(args.file, list(args.set or []) + [f"seed={seed}"]) for seed in args.seeds]
    jobs = [Job(s, f"{args.file} (seed {s.seed})", Path(args.out), args.resume, f"seed {s.seed}") for s in scenarios]
    outcomes = run_jobs(jobs, args.jobs, args.ray, progress_printer(len(jobs)))
    folders = [run_folder(args.out, o.job.scenario) for o in outcomes if o.error is None]
    if folders:
        table, _ = write_report(folders, folders[0].parent / "plots")
        print(f"\n{table}\n\nrun folders: {folders[0].parent}/<seed>; plots: {folders[0].parent / 'plots'}")
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        raise TestbedError(f"{len(failed)} of {len(outcomes)} runs did not complete "
                           f"({', '.join(o.job.label for o in failed)}); their folders say how they ended")


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of seeds; write e.g. 0,1,2") from None
    if len(set(seeds)) < len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r} lists a seed twice")
    return seeds


def _validate(args) -> None:
    from testbed import scenario as sc

    for file in args.files:
        s = sc.load(file, args.set or [])
        print(f"{file}: ok ({s.algorithm.name} on {s.data.name}, {s.fleet.size} devices, {_protocol(s)})")


def _protocol(s) -> str:
    """The scenario's protocol in a few words."""
    p = s.protocol
    if p.kind == "sync":
        return f"{s.round.clients_per_round} per round"
    triggers = ([f"every {p.buffer_size} updates"] if p.buffer_size else []) + (
        [f"every {p.period_s:g} s"] if p.period_s else [])
    rule = f"FedAsync mixing {p.mixing:g}" if p.mixing else "FedBuff"
    unused = "; round: not used" if s.round is not None else ""
    return f"async: {p.concurrency} in flight, aggregating {' or '.join(triggers)} ({rule}{unused})"


@contextmanager
def _analysis_errors():
    """What the analysis raises about its input, as one-line errors."""
    from analysis.compare import UnknownBaseline
    from analysis.report import MissingMetric
    from analysis.runs import DamagedRun

    try:
        yield
    except FileNotFoundError as err:
        raise TestbedError(str(err).strip("'\"")) from None
    except DamagedRun as err:
        raise TestbedError(str(err)) from None
    except UnknownBaseline as err:
        raise TestbedError(str(err)) from None
    except MissingMetric as err:
        raise TestbedError(f"{err} (or report on --metric accuracy)") from None


def _report(args) -> None:
    from analysis.pages import write_pages

    out = args.out or (Path(args.runs[0]) / "plots" if len(args.runs) == 1 else Path("report"))
    with _analysis_errors():
        table, written = write_pages(args.runs, out, args.target, args.baseline, args.metric)
    print(table + "\n\nwritten:\n" + "\n".join(f"  {p}" for p in written))


def _compare(args) -> None:
    from analysis.compare import write_compare
    from analysis.report import format_seed_table

    with _analysis_errors():
        table, written = write_compare(args.runs, args.out, args.target, args.baseline, args.metric)
    print(format_seed_table(table) + "\n\nwritten:\n" + "\n".join(f"  {p}" for p in written))


def _sweep(args) -> None:
    from testbed.sweep import sweep

    sweep(args.file, args.grid, args.set or [], args.out, args.quiet, args.jobs, args.ray)


def _models(args) -> None:
    from testbed.models.summary import format_table

    print(format_table())
    print("\nforward_flops: multiply-adds for one sample, as fvcore and the papers count them; "
          "training costs 3x that per sample")


def _jobs(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of jobs; give a whole number >= 1")
    return int(text)


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
    run = sub.add_parser("run", help="run a scenario and write runs/<scenario>/<seed>/")
    run.add_argument("file")
    run.add_argument("--seed", type=int, help="override the scenario's seed")
    run.add_argument("--seeds", type=_seeds, metavar="S1,S2,...", help="one run per seed (with --jobs / --ray, "
                     "several at once), then one report over them")
    run.add_argument("--out", default="runs", help="root folder of run folders (default: runs)")
    run.add_argument("--set", action="append", metavar="KEY.PATH=VALUE", help="override a scenario field")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--resume", action="store_true", help="go on from the run folder's checkpoint after a crash "
                     "(from round 1 where it has none); without it an existing run folder is overwritten")
    _parallel_options(run)
    run.set_defaults(handler=_run)
    val = sub.add_parser("validate", help="check scenario files without running them")
    val.add_argument("files", nargs="+")
    val.add_argument("--set", action="append", metavar="KEY.PATH=VALUE")
    val.set_defaults(handler=_validate)
    swp = sub.add_parser("sweep", help="run every combination of a grid of scenario fields into "
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
    swp.set_defaults(handler=_sweep)
    rep = sub.add_parser("report", help="time-to-accuracy tables and plots for run folders, compare's too, as "
                         "report.html (self-contained, sortable tables) and report.md")
    rep.add_argument("runs", nargs="+", help="run folders, or a sweep's folder (OUT/<scenario>, with sweep.csv)")
    rep.add_argument("--baseline", metavar="NAME", help="speedups against this algorithm or group (see compare)")
    rep.add_argument("--out", type=Path, help="folder for the plots (default: RUN/plots, or report/ for several)")
    rep.add_argument("--target", type=float, action="append", help="target accuracy (repeatable)")
    rep.add_argument("--metric", choices=["accuracy", "local_accuracy"], default="accuracy",
                     help="what the targets and accuracy plots are on: accuracy (global model, global test set; "
                     "default) or local_accuracy (mean over devices of each one's accuracy on its own test data, "
                     "as personalized FL papers report)")
    rep.set_defaults(handler=_report)
    cmp = sub.add_parser("compare", help="runs grouped by everything but the seed: mean±std over seeds of time, "
                         "uplink and FLOPs to each target, speedups, and comparison plots")
    cmp.add_argument("runs", nargs="+", help="run folders, or a sweep's folder (OUT/<scenario>, with sweep.csv)")
    cmp.add_argument("--baseline", metavar="NAME", help="speedup against this algorithm under the same other "
                     "settings, or against this group label")
    cmp.add_argument("--out", type=Path, default=Path("compare"), help="folder for compare.csv and the plots "
                     "(default: compare)")
    cmp.add_argument("--target", type=float, action="append", help="target accuracy (repeatable)")
    cmp.add_argument("--metric", choices=["accuracy", "local_accuracy"], default="accuracy",
                     help="what the targets are on (see report)")
    cmp.set_defaults(handler=_compare)
    mod = sub.add_parser("models", help="every model with its parameters and forward FLOPs per sample")
    mod.set_defaults(handler=_models)
    top.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    for command in sub.choices.values():  # also after the command: testbed run x.yaml --debug
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return top


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
        print(f"error: {_one_line(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as err:
        if getattr(args, "debug", False):
            raise
        where = f"{err.filename}: " if err.filename else ""
        print(f"error: {where}{_one_line(err.strerror or err)}; check the path and that it can be written",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted: the tables written so far are kept; --resume goes on", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # noqa: BLE001 - a bug: one line, the traceback in a file
        if getattr(args, "debug", False):
            raise
        log = getattr(err, "log_file", None) or write_crash_log(err)
        where = plugins.culprit(err)
        if where:  # the user's algorithm, model or loader raised while running: theirs to fix, not a testbed bug
            print(f"error: the plugin code at {where} raised {type(err).__name__}: {_one_line(err)}; fix it there "
                  f"(traceback in {log}; --debug shows it here)", file=sys.stderr)
            return EXIT_BAD_INPUT
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
