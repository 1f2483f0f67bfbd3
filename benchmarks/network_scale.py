"""Network scale benchmark: the engine at 100,000 devices with and without shared links (issues 26 and 35).

scale.yaml (100,000 phones, Markov availability, logreg; scale.py's zero-update executor, so all the time is engine)
played as it is, and with every device in one of 100 cells (dealt in turn) whose downlink and uplink are narrower
than the sum of the ~10 devices' rates a round puts in each (so the cells bind), behind a server link that binds
too; twice: (a) synchronous rounds of 1,000 devices; (b) FedBuff, 100 tasks in flight (about one a cell), K = 10,
where every dispatch plans its new tasks beside those still in flight. The runs (with the third below) alternate
--repeat times, the best of each kept. The aim: through shared links within 2x of private links, per round and
per aggregation.

A third run plays the shared one with its network path free: each plan's answer through the shared links
(Planner.contended) handed back as the shared run gave it, and no links.csv. It costs what the shared links' own
events cost the engine (through them arrivals spread, so there are more instants to settle and plans to make),
and the shared run's excess over it is the network path's.

FedBuff runs 100 aggregations by default: a run's first rows carry both runs' one-time costs (the private run's
census sorts its on-interval bounds; the first dispatch plans 100 tasks at once) and its private run's first plans
carry ten tasks each where a settled run's carry one, so a short run flatters the ratio (benchmarks/RESULTS.md,
by instructions: 1.73x at 30 aggregations, 2.21x at 100, 2.16x at 200).

    python benchmarks/network_scale.py [--rounds 10] [--aggregations 100] [--repeat 5]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from contextlib import contextmanager

from _harness import machine, warm_up_torch_func
from async_scale import cpu_timed

from testbed.protocols.planning import Planner

# ~10 devices a cell a round, each phone 2.5-12.5 MB/s down (devices/catalog): a cell of 8 MB/s down and 2 MB/s up
# binds whenever several of them transfer at once; the server's 200 MB/s binds when most of the 1,000 do
CELLS = ("network={cells: [{name: cell, count: 100, down_Bps: 8.0e6, up_Bps: 2.0e6, groups: [0, 1, 2]}], "
         "server: {down_Bps: 2.0e8, up_Bps: 5.0e7}}")
FEDBUFF = "protocol={kind: async, concurrency: 100, buffer_size: 10}"
TARGET = 2.0


def compare(title: str, common: list[str], repeat: int) -> list[float]:
    """Private links, the 100 cells, and the cells with the network path free (replayed), alternated `repeat`
    times, best of each: the table's rows, and the shared / private ratios of wall-clock and CPU time, per row and
    per dispatch (a plan of the tasks sent at one instant: through shared links FedBuff's arrivals no longer fall
    at the same instants, so a row holds more)."""
    shared, free = "100 shared cells and the server's links", "the same, its network path free (replayed)"
    runs = {"private links": common, shared: common + [CELLS], free: common + [CELLS]}
    best: dict[str, tuple[float, float, list, int]] = {}
    answers: list = []   # the shared run's, in turn
    for _ in range(repeat):
        for name, overrides in runs.items():
            with counted(Planner, "plan_round") as plans, answered(answers, replay=name == free):
                seconds, records, cpu = cpu_timed(overrides, profile=False)
            old = best.get(name, (math.inf, math.inf, records, plans[0]))
            if name == free and [r["t_end_s"] for r in records] != [r["t_end_s"] for r in best[shared][2]]:
                raise SystemExit("error: the replayed run's aggregations fell elsewhere than the shared run's")
            best[name] = (min(seconds, old[0]), min(cpu, old[1]), records, plans[0])
    print(f"\n{title}\n\n| run | ms per row (wall) | CPU ms per row | plans per row | CPU ms per plan "
          "| mean row, simulated s | waited s a row |")
    print("|---|---|---|---|---|---|---|")
    wall, cpu, per_plan = [], [], []
    for name, (seconds, cpu_s, records, plans) in best.items():
        simulated = sum(r["t_end_s"] - r["t_start_s"] for r in records) / len(records)
        waited = sum(r.get("network_wait_s", 0.0) for r in records) / len(records)
        wall.append(seconds / len(records))
        cpu.append(cpu_s / len(records))
        per_plan.append(cpu_s / plans)
        print(f"| {name} | {1000 * wall[-1]:.1f} | {1000 * cpu[-1]:.1f} | {plans / len(records):.2f} | "
              f"{1000 * per_plan[-1]:.2f} | {simulated:.3f} | {waited:.2f} |")
    ratios = [wall[1] / wall[0], cpu[1] / cpu[0]]
    print(f"\nshared / private: {ratios[0]:.2f}x wall-clock, {ratios[1]:.2f}x CPU per row (target <= {TARGET:.0f}x); "
          f"{per_plan[1] / per_plan[0]:.2f}x CPU per plan\nwith the network path free: {cpu[2] / cpu[0]:.2f}x CPU "
          f"per row; the network path: {(cpu[1] - cpu[2]) / cpu[0]:.2f}x; load average {os.getloadavg()[0]:.2f}")
    return ratios


@contextmanager
def counted(owner, method: str):
    """Count calls of owner.method while the block runs: yields a one-item list holding the count."""
    count, original = [0], getattr(owner, method)

    def wrapper(*args, **kwargs):
        count[0] += 1
        return original(*args, **kwargs)
    setattr(owner, method, wrapper)
    try:
        yield count
    finally:
        setattr(owner, method, original)


@contextmanager
def answered(answers: list, replay: bool):
    """While the block runs, Planner.contended appends its answers to `answers` (where it is empty), or with
    `replay` hands them back in turn without solving (the answers of an identical run: same scenario, seed)."""
    original = Planner.contended
    if replay:
        feed = iter(answers)
        Planner.contended = lambda self, *args, **kwargs: next(feed)
    elif not answers:
        def recording(self, *args, **kwargs):
            answers.append(original(self, *args, **kwargs))
            return answers[-1]
        Planner.contended = recording
    try:
        yield
    finally:
        Planner.contended = original


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="synchronous rounds")
    parser.add_argument("--aggregations", type=int, default=100, help="FedBuff's aggregations (10 updates each)")
    # a FedBuff run is ~0.2-0.4 s, within which a shared VM's speed drifts: best of 5 (RESULTS.md: best of 3 gave
    # 1.39-2.05x, best of 5 1.75-1.89x on one machine within 20 minutes)
    parser.add_argument("--repeat", type=int, default=5,
                        help="alternate the three runs this many times, keep the best")
    parser.add_argument("--only", choices=("sync", "fedbuff"), help="one of the two comparisons")
    args = parser.parse_args(argv)
    print(f"network_scale on {machine()}; load average {os.getloadavg()[0]:.2f}")
    warm_up_torch_func()
    if args.only != "fedbuff":
        compare(f"synchronous rounds, 1,000 a round, {args.rounds} rounds (a row: a round)",
                [f"stop.max_rounds={args.rounds}", f"eval.every_rounds={args.rounds}"], args.repeat)
    if args.only != "sync":
        a = args.aggregations
        compare(f"FedBuff, 100 in flight, K = 10, {a} aggregations (a row: an aggregation)",
                [f"stop.max_rounds={a}", f"eval.every_rounds={a}", FEDBUFF], args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
