"""CPU workers: one run's clients trained in worker processes (executor.workers) against one process, and
against the Ray executor, on a scenario (W1 by default) as written and at 5 local epochs.

Each configuration builds the scenario (the worker pool or Ray starts here: timed apart, as `start`) and runs it
through the engine in this process on executor.threads torch threads (one), as `testbed run` does. Printed per
run: seconds a round over rounds 2..R (the workers have started and paid their first torch calls), the whole
run (Engine(...) + run(), round 1 included), the start, and whether the round tables equal those of
workers: 1 exactly (every number of every round; Ray's workers vmap their share with the batched executor, so
its tables differ in the last digits). Runs alternate across configurations, --repeat times; the best of each
is kept. The fork server that the first pool of a process starts (it imports torch once) is started before
any stopwatch and its seconds printed. `--neighbours N` runs N busy processes (threads.py's) beside every run:
a busy machine; `--idle P` (without neighbours) waits before each run for the CPUs to be P% idle: a shared
machine. `auto` resolves from the load average when it is built; its count is printed.

    python benchmarks/cpu_workers.py [--rounds 6] [--repeat 2] [--neighbours 0] [--idle 90] [--workers 2,auto]
        [--ray 2] [--workloads as-is,5epochs] [--scenario benchmarks/w1.yaml --set KEY=VALUE ...]

On a many-core machine, e.g.: --workers 2,4,8,16,auto --ray 16 --set executor.threads=1
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from _harness import HERE, build, machine, ratio, run_testbed, warm_up, warm_up_torch_func
from plain_cnn import PlainCNN
from threads import NEIGHBOUR

from testbed.execution.processes import ProcessExecutor
from testbed.execution.threads import torch_threads

WORKLOADS = {"as-is": [], "5epochs": ["client.local_epochs=5"]}   # the scenario as written, and at 5 local epochs


def fork_server_seconds() -> float:
    """Start the fork server (and its import of torch) the way a first pool does (a pool of two)."""
    exp, why = build(HERE / "w1.yaml", ["stop.max_rounds=1", "executor={kind: serial, workers: 2}"])
    start = time.perf_counter()
    exp.executor._wait_ready()
    seconds = time.perf_counter() - start
    exp.executor.close()
    return seconds


def wait_idle(percent: float, limit_s: float = 600) -> float:
    """Wait until the CPUs were at least `percent` idle over 4 s (/proc/stat), at most limit_s; returns the idle %."""
    def ticks():
        values = [int(v) for v in open("/proc/stat").readline().split()[1:9]]
        return sum(values), values[3]

    deadline = time.monotonic() + limit_s
    while True:
        total, idle = ticks()
        time.sleep(4)
        total2, idle2 = ticks()
        share = 100 * (idle2 - idle) / max(total2 - total, 1)
        if share >= percent or time.monotonic() > deadline:
            return share


def one_run(scenario: str, overrides: list[str]) -> dict:
    load = os.getloadavg()[0]
    start = time.perf_counter()
    exp, why = build(scenario, overrides)
    if exp is None:
        return {"error": why}
    built = time.perf_counter() - start
    workers = len(exp.executor.processes) if isinstance(exp.executor, ProcessExecutor) else None
    with torch_threads(exp.scenario.executor.threads):   # the run's threads, as the runner sets them
        run = run_testbed(exp)
    rounds = len(run.round_ends)
    return {"start": built, "seconds": run.seconds, "per_round": run.after_first_round / (rounds - 1),
            "train": run.train_seconds, "records": repr(run.records), "workers": workers,
            "load": (load + os.getloadavg()[0]) / 2}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--neighbours", type=int, default=0)
    parser.add_argument("--scenario", default=str(HERE / "w1.yaml"))
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE, as testbed run's --set")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="of: " + ", ".join(WORKLOADS))
    parser.add_argument("--workers", default="2,auto", help="the counts to time against workers 1")
    parser.add_argument("--ray", type=int, default=2, help="Ray workers to time as well (0: none)")
    parser.add_argument("--idle", type=float, default=0,
                        help="before each run, wait (at most 10 minutes) for the CPUs to be this %% idle over 4 s")
    args = parser.parse_args(argv)
    print(f"cpu workers on {machine()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"load average {os.getloadavg()[0]:.2f}; {args.neighbours} busy neighbours")
    warm_up(PlainCNN())
    warm_up_torch_func()
    print(f"the fork server's start (imports torch; once a process, before any stopwatch): "
          f"{fork_server_seconds():.2f} s")
    configs = {"workers 1": "{kind: serial}"} | {f"workers {n}": f"{{kind: serial, workers: {n}}}"
                                                 for n in args.workers.split(",")}
    if args.ray:
        configs[f"ray {args.ray}"] = f"{{kind: ray, workers: {args.ray}}}"
    name = os.path.splitext(os.path.basename(args.scenario))[0]
    busy = [subprocess.Popen([sys.executable, "-c", NEIGHBOUR]) for _ in range(args.neighbours)]
    try:
        time.sleep(1.0 if busy else 0.0)
        for workload in args.workloads.split(","):
            overrides = [f"stop.max_rounds={args.rounds}", *args.set, *WORKLOADS[workload]]
            workload = name if workload == "as-is" else f"{name}_{workload}"
            best: dict[str, dict] = {}
            for attempt in range(args.repeat):
                for label, executor in configs.items():
                    idle = wait_idle(args.idle) if args.idle else None
                    row = one_run(args.scenario, overrides + [f"executor={executor}"])
                    if "error" in row:
                        print(f"{workload}, {label}: not run ({row['error']})")
                        continue
                    print(f"{workload}, {label}, run {attempt + 1}: {row['per_round']:.3f} s a round, "
                          f"{row['seconds']:.2f} s in all (start {row['start']:.2f} s), load {row['load']:.2f}"
                          + (f", {row['workers']} workers" if row["workers"] else "")
                          + (f" (idle {idle:.0f}% before)" if idle is not None else ""), flush=True)
                    if label not in best or row["per_round"] < best[label]["per_round"]:
                        best[label] = row
            report(workload, best, args.rounds)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 0


def report(workload: str, best: dict[str, dict], rounds: int) -> None:
    one = best.get("workers 1")
    print(f"\n{workload}, best of each:\n| executor | s a round (2..{rounds}) | speed-up over workers 1 | "
          "whole run s | of which train() s | start s | tables = workers 1 | load |")
    print("|---|---|---|---|---|---|---|---|")
    for label, row in best.items():
        same = "-" if one is None or row is one else ("yes" if row["records"] == one["records"] else "no")
        name = label + (f" ({row['workers'] or 1})" if label == "workers auto" else "")
        print(f"| {name} | {row['per_round']:.3f} | {ratio(one and one['per_round'], row['per_round'])} | "
              f"{row['seconds']:.2f} | {row['train']:.2f} | {row['start']:.2f} | {same} | {row['load']:.2f} |")
    print()


if __name__ == "__main__":
    sys.exit(main())
