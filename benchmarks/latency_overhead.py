"""What the latency clock costs a run (issue 43: at most 2% of W1's wall time).

W1 (benchmarks/w1.yaml, 20 rounds, serial executor, one thread) on the FLOP clock and with compute: latency,
alternated (flops, latency, flops, latency, ...: the VM drifts, so the pairs are timed next to each other), each
run through the engine with the experiment built outside the stopwatch. The latency run's own work is timed too:
its Engine(...) setup (where the model is traced) and the planner's calls to FleetLatency.capacity.

    python benchmarks/latency_overhead.py [--pairs 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from _harness import HERE, build, machine, run_testbed, warm_up, warm_up_torch_func

SCENARIO = HERE / "w1.yaml"


def timed_capacity(exp, spent: list[float]) -> None:
    """Count the seconds the planner spends in FleetLatency.capacity (its first call traces the model)."""
    from testbed.latency import clock
    original = clock.FleetLatency.capacity

    def capacity(self, task, flops, capacity_flops_per_s):
        start = time.perf_counter()
        try:
            return original(self, task, flops, capacity_flops_per_s)
        finally:
            spent[0] += time.perf_counter() - start

    clock.FleetLatency.capacity = capacity


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(machine())
    warm_up_torch_func()
    spent = [0.0]
    times: dict[str, list[float]] = {"flops": [], "latency": []}
    for pair in range(args.pairs):
        for clock_name in ("flops", "latency"):
            exp, why = build(SCENARIO, [f"compute={clock_name}"])
            if exp is None:
                print(why)
                return 1
            warm_up(exp.model)
            if clock_name == "latency" and pair == 0:
                timed_capacity(exp, spent)
            run = run_testbed(exp)
            times[clock_name].append(run.seconds)
            print(f"pair {pair + 1} {clock_name:8s} {run.seconds:7.2f} s (setup {run.setup_seconds:.2f} s, "
                  f"training {run.train_seconds:.2f} s)", flush=True)
    ratios = [lat / flo for flo, lat in zip(times["flops"], times["latency"])]
    print(f"latency / flops, each pair: {', '.join(f'{r:.3f}' for r in ratios)}; median {statistics.median(ratios):.3f}")
    print(f"the planner's FleetLatency calls over {args.pairs} latency runs: {spent[0]:.3f} s "
          f"({spent[0] / sum(times['latency']):.2%} of their wall time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
