"""What run tracking costs at W1 (benchmarks/w1.yaml: 20 rounds, evaluation after every round): the same run
through `testbed.run` without a tracker and with each of `--track tensorboard`, `mlflow`, `wandb` (W&B offline),
alternated, in this one process (after a first, untimed run: imports and the dataset cache paid once).

Per tracker it prints the median wall seconds of the run without and with it and their ratio, and, from timers
around the trackers' own calls, the seconds their start took, the mean milliseconds of one round's log and the
seconds their finish took (artifacts: the run's tables; plots=False for both, so the report is not timed). The
issue's bound: at most 2% over the run without tracking. A tracker whose library is not installed is skipped.

    python benchmarks/tracking_overhead.py [--repeat 3] [--rounds 20] [--trackers tensorboard,mlflow,wandb]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBRARIES = {"tensorboard": "tensorboard", "mlflow": "mlflow", "wandb": "wandb"}


def timed_calls():
    """Wrap Trackers' start, log and finish in timers: seconds per call, by method."""
    from testbed import trackers

    spent = defaultdict(list)
    for method in ("start", "log", "finish"):
        original = getattr(trackers.Trackers, method)

        def wrapper(self, *args, _original=original, _method=method, **kwargs):
            start = time.perf_counter()
            try:
                return _original(self, *args, **kwargs)
            finally:
                spent[_method].append(time.perf_counter() - start)

        setattr(trackers.Trackers, method, wrapper)
    return spent


def one_run(out: Path, rounds: int, track: list[str]) -> float:
    import testbed

    start = time.perf_counter()
    testbed.run(HERE / "w1.yaml", set={"stop.max_rounds": rounds}, out=out, quiet=True, plots=False, overwrite=True,
                track=track)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--trackers", default="tensorboard,mlflow,wandb")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)", flush=True)
    names = [n for n in args.trackers.split(",") if importlib.util.find_spec(LIBRARIES[n]) is not None]
    skipped = sorted(set(args.trackers.split(",")) - set(names))
    if skipped:
        print(f"skipped (not installed): {', '.join(skipped)}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{tmp / 'mlflow.db'}")
        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_DIR", str(tmp / "wandb"))
        one_run(tmp / "warm", args.rounds, [])   # imports, the dataset cache
        spent = timed_calls()
        wall = defaultdict(list)
        calls = {}
        for _ in range(args.repeat):
            for name in names:   # alternated: the run without, then with this tracker
                wall[(name, False)].append(one_run(tmp / "plain", args.rounds, []))
                spent.clear()
                wall[(name, True)].append(one_run(tmp / name, args.rounds, [name]))
                calls[name] = {method: list(times) for method, times in spent.items()}
    print(f"\nW1, {args.rounds} rounds, evaluation every round; medians of {args.repeat} alternated runs")
    print(f"{'tracker':<12} {'without s':>10} {'with s':>8} {'ratio':>7} {'start s':>8} {'log ms/round':>13} "
          f"{'finish s':>9}")
    for name in names:
        plain, tracked = statistics.median(wall[(name, False)]), statistics.median(wall[(name, True)])
        c = calls[name]
        print(f"{name:<12} {plain:>10.2f} {tracked:>8.2f} {tracked / plain:>7.3f} {sum(c['start']):>8.3f} "
              f"{1000 * statistics.mean(c['log']):>13.3f} {sum(c['finish']):>9.3f}")
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
