"""Ray scaling: the Ray executor with 1 worker against 2 workers on a compute-heavy scenario.

W1 (benchmarks/w1.yaml) made heavier: 5 local epochs, 6 rounds of 10 clients, evaluation at the last round
only; executor {kind: ray, workers: N}. Each worker is a Ray actor with one CPU and one torch thread that
trains its share of a round's clients with the batched executor. Timed: Engine(...) + run() (every round,
the first included, in which the workers finish starting); and rounds 2..6 alone. Starting Ray and the
workers (in the executor's constructor) is timed apart. The testbed's serial and batched executors (in this
process, torch's default threads) run the same scenario for reference.

    python benchmarks/ray_scaling.py [--rounds 6] [--epochs 5]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from _harness import HERE, build, machine, ratio, run_testbed, warm_up, warm_up_torch_func
from plain_cnn import PlainCNN

SCENARIO = HERE / "w1.yaml"
TARGET = 1.6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"ray scaling on {machine()}; load average {os.getloadavg()[0]:.2f}")
    overrides = [f"stop.max_rounds={args.rounds}", f"client.local_epochs={args.epochs}",
                 f"eval.every_rounds={args.rounds}"]
    warm_up(PlainCNN())
    print(f"first torch.func call in this process: {warm_up_torch_func():.2f} s of one-time imports (not timed; "
          "each Ray worker pays its own in round 1)")

    rows = {}
    for label, executor in (("serial", "{kind: serial}"), ("batched", "{kind: batched}"),
                            ("ray, 1 worker", "{kind: ray, workers: 1}"), ("ray, 2 workers", "{kind: ray, workers: 2}")):
        start = time.perf_counter()
        exp, why = build(SCENARIO, overrides + [f"executor={executor}"])
        built = time.perf_counter() - start
        if exp is None:
            print(f"{label}: not available yet ({why})")
            continue
        run = run_testbed(exp)
        rows[label] = run
        print(f"{label}: {run.seconds:.2f} s, rounds 2..{args.rounds} {run.after_first_round:.2f} s "
              f"(building, with Ray's start: {built:.2f} s); final accuracy {run.final_accuracy:.4f}")

    print("\n| executor | seconds | rounds 2.. seconds | final accuracy |")
    print("|---|---|---|---|")
    for label, run in rows.items():
        print(f"| {label} | {run.seconds:.2f} | {run.after_first_round:.2f} | {run.final_accuracy:.4f} |")
    one, two = rows.get("ray, 1 worker"), rows.get("ray, 2 workers")
    if one and two:
        print(f"\nray 1 worker / 2 workers: {ratio(one.seconds, two.seconds)} whole run, "
              f"{ratio(one.after_first_round, two.after_first_round)} rounds 2..{args.rounds} "
              f"(target >= {TARGET}x)")
        if one.selection != two.selection:
            print("note: 1 and 2 workers trained other devices; selection must not depend on the executor")
        gap = max(abs(a - b) for a, b in zip(one.accuracies, two.accuracies) if a == a and b == b)
        print(f"accuracy, 1 vs 2 workers: largest difference {gap:.4f} over the evaluated rounds")
    print(f"load average at the end {os.getloadavg()[0]:.2f} (2 cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
