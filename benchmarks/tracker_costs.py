"""Benchmark: what `--track NAME` costs a run. Each tracker in its own process (as `testbed run` is), with torch
imported first (a run has it): two runs one after the other, each start() (the first one imports the tracker's
library and, for MLflow, makes the SQLite store), --rounds calls of log() with a rounds.csv row of 22 columns, one
every --pace seconds (the rest of a round is training: an asynchronous logger writes meanwhile), and finish().
Per log: the time log() holds the round up (median, 95th percentile, max), and the process's CPU time a round over
the same paced loop without a tracker (the logger's own threads; W&B's writer is a separate process, not counted).
The round it is measured against: 0.3 s (W1 on 2 cores).

    python benchmarks/tracker_costs.py [--rounds 100] [--pace 0.1] [--trackers tensorboard mlflow wandb]
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROUND_S = 0.3
HERE = Path(__file__).resolve().parent


def row(n: int) -> dict:
    """A round's row as rounds.csv has it, energy included; accuracy every 5th round, NaN between."""
    nan = float("nan")
    return dict(round=n, t_start_s=2.5 * (n - 1), t_end_s=2.5 * n, online=66, selected=13, arrived=10, dropped=1,
                late=0, surplus=2, bytes_up=23361638 + n, bytes_down=27654132 + n, flops=10317625344 + n,
                wasted_flops=1126490112, wasted_bytes=4453690, server_flops=0, train_loss=2.0 / n,
                accuracy=0.9 - 0.5 / n if n % 5 == 0 else nan, loss=1.0 / n if n % 5 == 0 else nan,
                local_accuracy=nan, local_accuracy_p10=nan, energy_J=120.5 + n, wasted_energy_J=3.25)


def paced(rounds: int, pace: float, log) -> tuple[list[float], float]:
    """log(row) each `pace` s: the time each call took and the process CPU seconds a round."""
    took = []
    cpu = time.process_time()
    for n in range(1, rounds + 1):
        start = time.perf_counter()
        log(row(n))
        took.append(time.perf_counter() - start)
        time.sleep(max(0.0, pace - took[-1]))
    return took, (time.process_time() - cpu) / rounds


def one(spec: str, rounds: int, pace: float) -> dict:
    """Two runs of `spec` in this process, in a temporary out folder: their costs."""
    importlib.import_module("torch")  # a run has imported it: not the tracker's cost

    from testbed.trackers import TrackedRun, Trackers

    _, idle_cpu = paced(rounds, pace, lambda r: None)
    out = {"idle_cpu_per_round_s": idle_cpu, "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("WANDB_MODE", "offline")
        for seed in (0, 1):
            folder = Path(tmp) / "runs" / "bench" / str(seed)
            folder.mkdir(parents=True)
            (folder / "summary.json").write_text("{}")
            run = TrackedRun(f"bench/{seed}", None, "bench", {"seed": seed, "model": {"name": "cnn_512"}}, folder,
                             Path(tmp) / "runs")
            trackers = Trackers([spec], run)
            start = time.perf_counter()
            trackers.start()
            started = time.perf_counter() - start
            took, cpu = paced(rounds, pace, trackers.log)
            start = time.perf_counter()
            trackers.finish({"status": "completed", "final_accuracy": 0.9}, [folder / "summary.json"])
            finished = time.perf_counter() - start
            took.sort()
            out["runs"].append({"start_s": started, "finish_s": finished, "log_median_s": statistics.median(took),
                                "log_p95_s": took[int(0.95 * (len(took) - 1))], "log_max_s": took[-1],
                                "cpu_per_round_s": cpu - idle_cpu})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--pace", type=float, default=0.1)
    parser.add_argument("--trackers", nargs="+", default=["tensorboard", "mlflow", "wandb"])
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one tracker, JSON out
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.rounds, args.pace)))
        return
    sys.path.insert(0, str(HERE))
    from _harness import machine

    print(machine(), f"load {os.getloadavg()[0]:.2f}")
    print(f"{args.rounds} rounds a run, one log every {args.pace} s; % of a {ROUND_S} s round")
    print(f"{'tracker':<12} {'run':>3} {'start s':>8} {'log med ms':>10} {'p95 ms':>7} {'max ms':>7} "
          f"{'% round':>8} {'cpu ms/rd':>9} {'finish s':>8}")
    for spec in args.trackers:
        child = subprocess.run([sys.executable, __file__, "--one", spec, "--rounds", str(args.rounds),
                                "--pace", str(args.pace)], capture_output=True, text=True)
        if child.returncode:
            print(f"{spec:<12} failed: {child.stderr.strip().splitlines()[-1:]}")
            continue
        result = json.loads(child.stdout.strip().splitlines()[-1])
        for n, r in enumerate(result["runs"], 1):
            print(f"{spec:<12} {n:>3} {r['start_s']:>8.3f} {r['log_median_s'] * 1e3:>10.3f} "
                  f"{r['log_p95_s'] * 1e3:>7.3f} {r['log_max_s'] * 1e3:>7.2f} "
                  f"{100 * r['log_median_s'] / ROUND_S:>7.2f}% {r['cpu_per_round_s'] * 1e3:>9.3f} "
                  f"{r['finish_s']:>8.3f}")
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
