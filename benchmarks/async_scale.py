"""Async scale benchmark: the engine alone at 100,000 devices, asynchronous (FedBuff) against synchronous rounds.

scale.yaml (100,000 phones with Markov availability, logreg on synthetic data) played twice in this process with
scale.py's ZeroExecutor (no training, zero updates), so all the time is engine: (a) synchronous rounds, 1,000
devices a round; (b) protocol async, 1,000 tasks in flight, aggregating every --buffer updates (FedBuff). Both are
timed from Engine(...) to the end of run(); reported per round or aggregation and per trained (aggregated) update,
in wall-clock seconds and in the process's CPU seconds (less sensitive to a machine shared with other work). With
--repeat N the two runs alternate N times and the best of each is kept. The aim: async no slower per trained update
than sync.

    python benchmarks/async_scale.py [--rounds 20] [--buffer 100] [--repeat 1] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import math
import os
import pstats
import sys
import time

from _harness import HERE, build, machine, warm_up_torch_func
from scale import ZeroExecutor, run_engine

SCENARIO = HERE / "scale.yaml"


def timed(overrides: list[str], profile: bool) -> tuple[float, list[dict]]:
    return cpu_timed(overrides, profile)[:2]


def cpu_timed(overrides: list[str], profile: bool) -> tuple[float, list[dict], float]:
    """(wall seconds, records, CPU seconds) of the engine's run of scale.yaml with these overrides."""
    exp, why = build(SCENARIO, overrides)
    if exp is None:
        raise SystemExit(f"error: {why}")
    exp.executor.close()
    exp.executor = ZeroExecutor()
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    cpu = time.process_time()
    seconds, records = run_engine(exp)
    cpu = time.process_time() - cpu
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    return seconds, records, cpu


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="synchronous rounds")
    parser.add_argument("--buffer", type=int, default=100, help="FedBuff's K for the async run")
    parser.add_argument("--repeat", type=int, default=1, help="alternate the two runs this many times, keep the best")
    parser.add_argument("--profile", action="store_true", help="print each run's top functions (cProfile)")
    args = parser.parse_args(argv)
    print(f"async_scale on {machine()}; load average {os.getloadavg()[0]:.2f}")
    warm_up_torch_func()
    aggregations = args.rounds * 1000 // args.buffer  # as many trained updates as the sync run
    overrides = {
        "sync, 1,000 a round": [f"stop.max_rounds={args.rounds}", f"eval.every_rounds={args.rounds}"],
        f"async, 1,000 in flight, K = {args.buffer}": [
            f"stop.max_rounds={aggregations}", f"eval.every_rounds={aggregations}",
            f"protocol={{kind: async, concurrency: 1000, buffer_size: {args.buffer}}}"],
    }
    runs: dict[str, tuple[float, list[dict], float]] = {}
    for _ in range(args.repeat):
        for name, override in overrides.items():
            seconds, records, cpu = cpu_timed(override, args.profile)
            best = runs.get(name, (math.inf, records, math.inf))
            runs[name] = (min(seconds, best[0]), records, min(cpu, best[2]))
    print("\n| run | rows | trained updates | engine s | ms per row | us per trained update | CPU us per trained "
          "update | simulated s |")
    print("|---|---|---|---|---|---|---|---|")
    per_update, cpu_per_update = [], []
    for name, (seconds, records, cpu) in runs.items():
        updates = sum(r["arrived"] for r in records)
        per_update.append(seconds / updates)
        cpu_per_update.append(cpu / updates)
        print(f"| {name} | {len(records)} | {updates:,} | {seconds:.2f} | {1000 * seconds / len(records):.1f} | "
              f"{1e6 * seconds / updates:.0f} | {1e6 * cpu / updates:.0f} | {records[-1]['t_end_s']:.1f} |")
    print(f"\nasync / sync, per trained update: {per_update[1] / per_update[0]:.2f}x wall-clock, "
          f"{cpu_per_update[1] / cpu_per_update[0]:.2f}x CPU (best of {args.repeat}; load average "
          f"{os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
