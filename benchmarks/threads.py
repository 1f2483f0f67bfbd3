"""Torch threads of a run: wall-clock seconds of `testbed run` on 1 thread and on every core, alone and beside busy
neighbours, for the default thread count (issue 27).

Each run is the process a user starts, `python -m testbed run SCENARIO --set executor.threads=T --quiet`, timed
from start to exit, for T in 1 .. the machine's cores (the old default was all of them: torch's own). A neighbour
is another process computing on one core without pause (a torch matrix product on one thread in a loop, as another
run pinned to one thread would), started before the timed run and stopped after it. The workloads are the
benchmarks' W1 (`w1`: benchmarks/w1.yaml, cnn_512 on MNIST-5k, batch 10), W1 with batch 64 (`w1_batch64`,
efficiency.py's) and the quickstart (a user's first run), each cut to --rounds rounds. Runs alternate across thread counts, best of
--repeat.

    python benchmarks/threads.py [--rounds 5] [--repeat 2] [--neighbours 0,1,2]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import HERE, machine

ROOT = HERE.parent
WORKLOADS = {
    "w1": (HERE / "w1.yaml", []),
    "w1_batch64": (HERE / "w1.yaml", ["client.batch_size=64"]),
    "quickstart": (ROOT / "scenarios" / "quickstart.yaml", []),
}
NEIGHBOUR = ("import torch\ntorch.set_num_threads(1)\na = torch.randn(256, 256)\n"
             "while True:\n    a = (a @ a).tanh()\n")


def run_seconds(scenario: Path, overrides: list[str], threads: int, rounds: int, out: Path) -> float:
    sets = [f"stop.max_rounds={rounds}", f"executor.threads={threads}", *overrides]
    command = [sys.executable, "-m", "testbed", "run", str(scenario), "--out", str(out), "--quiet", "--overwrite"]
    for s in sets:
        command += ["--set", s]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def timed_beside(neighbours: int, runs) -> list[float]:
    """Seconds of each run in `runs` (callables) while `neighbours` busy processes run."""
    busy = [subprocess.Popen([sys.executable, "-c", NEIGHBOUR]) for _ in range(neighbours)]
    try:
        time.sleep(1.0 if busy else 0.0)  # the neighbours' imports done: they compute when the stopwatch starts
        return [run() for run in runs]
    finally:
        for process in busy:
            process.kill()
            process.wait()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=2, help="best of this many runs of each")
    parser.add_argument("--neighbours", default="0,1,2", help="busy neighbour counts, comma-separated")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="names, comma-separated")
    args = parser.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    thread_counts = sorted({1, cores})
    print(f"threads on {machine()}; load average {os.getloadavg()[0]:.2f} before the neighbours start")
    print(f"{args.rounds} rounds a run, best of {args.repeat}, thread counts {thread_counts}\n")
    print("| workload | busy neighbours | " + " | ".join(f"{t} thread{'s' * (t > 1)} (s)" for t in thread_counts)
          + f" | {cores} / 1 |")
    print("|---|---|" + "---|" * len(thread_counts) + "---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.workloads.split(","):
            scenario, overrides = WORKLOADS[name]
            for neighbours in (int(n) for n in args.neighbours.split(",")):
                best = {t: float("inf") for t in thread_counts}
                for _ in range(args.repeat):
                    runs = [lambda t=t: run_seconds(scenario, overrides, t, args.rounds, Path(tmp) / f"t{t}")
                            for t in thread_counts]
                    for t, s in zip(thread_counts, timed_beside(neighbours, runs)):
                        best[t] = min(best[t], s)
                cells = " | ".join(f"{best[t]:.2f}" for t in thread_counts)
                print(f"| {name} | {neighbours} | {cells} | {best[cores] / best[1]:.2f}x |", flush=True)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
