"""Scale benchmark: the engine alone at 100,000 devices (benchmarks/scale.yaml).

100,000 phones with Markov on/off availability (three classes, as in the quickstart), 1,000 selected per round
among those online, FedAvg of a logistic regression on LEAF's synthetic(1, 1) (400 generator clients, dim 10:
131,057 training samples dealt IID, 1 or 2 per device). The executor is replaced by ZeroExecutor, which
trains nothing and returns what a real executor returns for a device whose training left the model as it was
(a zero update), so everything that remains is engine: availability queries, selection, 1,000 timelines in
simpy, payload encoding and size checks, aggregation of 1,000 updates, records and event rows.

Reported: engine time per round = wall time of Engine(...) + run() / rounds (nothing subtracted: all of it is
engine; building the fleet, the data and the partition comes before and is timed apart), and peak memory:
the process's maximum resident set (getrusage; it includes torch, the dataset and the fleet) and, from a
second run under tracemalloc, the peak of what Python and numpy allocate during the engine's run.

    python benchmarks/scale.py [--rounds 20] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import resource
import sys
import time
import tracemalloc

from _harness import HERE, build, machine, warm_up_torch_func
from testbed.engine import Engine
from testbed.execution.threads import DEFAULT_THREADS, torch_threads

SCENARIO = HERE / "scale.yaml"
TARGET_MS, TARGET_GB = 30.0, 2.0  # issue 16: <= 30 ms a round at 100,000 devices


class ZeroExecutor:
    """Returns, for each job, what the real executors return (strategy.finish on the trained parameters) for
    parameters that training left unchanged: a zero update and a zero loss. No training at all, and no
    client-side work either: finish runs once per call and every job gets that same (read-only) result."""

    def train(self, strategy, jobs):
        if not jobs:
            return []
        first = jobs[0]
        result = strategy.finish(first.task, first.params, first.params, {"train_loss": 0.0}, {})
        return [result] * len(jobs)

    def close(self) -> None:
        pass


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def run_engine(exp) -> tuple[float, list[dict]]:
    """(wall seconds, rows) of the engine's run, on the torch threads a run of the scenario computes on
    (executor.threads, default 1; the runner sets them for the whole run): torch's own default, a thread a core,
    would spread the engine's small tensor operations over every core of a many-core machine."""
    records = []
    with torch_threads(exp.scenario.executor.threads):
        start = time.perf_counter()
        Engine(exp, lambda record, events: records.append(record)).run()
        return time.perf_counter() - start, records


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="print the engine's top functions (cProfile)")
    args = parser.parse_args(argv)
    print(f"scale on {machine()}; load average {os.getloadavg()[0]:.2f}")

    start = time.perf_counter()
    exp, why = build(SCENARIO, [f"stop.max_rounds={args.rounds}"])
    if exp is None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    build_s = time.perf_counter() - start
    exp.executor.close()
    exp.executor = ZeroExecutor()
    warm_up_torch_func()  # one-time imports that evaluation's functional_call would otherwise pay in round 20
    rss_built = maxrss_mb()
    print(f"built {exp.fleet.n:,} devices, {len(exp.dataset.train_y):,} training samples in {build_s:.1f} s "
          f"(not timed below); max RSS so far {rss_built:.0f} MB")

    seconds, records = run_engine(exp)
    rss_peak = maxrss_mb()
    per_round_ms = 1000 * seconds / len(records)
    online = sum(r["online"] for r in records) / len(records)
    selected = sum(r["selected"] for r in records) / len(records)
    arrived = sum(r["arrived"] for r in records) / len(records)
    print(f"{len(records)} rounds in {seconds:.2f} s: {per_round_ms:.1f} ms per round (engine only); "
          f"per round on average {online:,.0f} online, {selected:,.0f} selected, {arrived:,.0f} arrived; "
          f"simulated {records[-1]['t_end_s']:.1f} s")

    tracemalloc.start()
    traced_s, _ = run_engine(exp)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"under tracemalloc (slower: {traced_s:.1f} s): peak {traced_peak / 2**20:.1f} MB allocated by Python "
          "and numpy during the run")

    print("\n| measure | value | target |")
    print("|---|---|---|")
    print(f"| engine time per round | {per_round_ms:.1f} ms | <= {TARGET_MS:.0f} ms |")
    print(f"| peak memory, process max RSS | {rss_peak / 1024:.2f} GB ({rss_built / 1024:.2f} GB after build) "
          f"| <= {TARGET_GB:.0f} GB |")
    print(f"| peak memory, engine run (tracemalloc) | {traced_peak / 2**30:.3f} GB | |")
    print(f"| torch threads of the engine | {exp.scenario.executor.threads or DEFAULT_THREADS} | |")

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        run_engine(exp)
        profiler.disable()
        for order, count in (("cumulative", 30), ("tottime", 20)):
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(count)
            lines = [line.replace(str(HERE.parent) + "/", "") for line in text.getvalue().splitlines()]
            start = next(i for i, line in enumerate(lines) if "ncalls" in line)
            print(f"\nprofile of one more run, by {order} time:\n" + "\n".join(lines[start:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
