"""Training efficiency: counted training FLOPs per wall second, as a fraction of this machine's fp32 matmul peak.

1. Peak: torch.mm of square fp32 matrices (1024, 2048, 4096 in turn for 6 s, and again
   for 3 s after the runs), the best run,
   2 n^3 FLOPs each (two per multiply-add), with torch's default threads.
2. W1 with batch 64 (benchmarks/w1.yaml, client.batch_size=64; 1 local epoch, 20 rounds): the testbed with the
   serial and the batched executor, and the bare PyTorch loop of w1.py on the same selection for reference.
   FLOPs are the testbed's count: rounds.csv's `flops` (fvcore forward multiply-adds x 3 x samples) x 2 for
   real FLOPs. Each run is reported against the time spent training (the executor's train(), or the bare
   loop's SGD epochs) and against its whole wall time (with FLOP counting, the clock, aggregation, evaluation).

    python benchmarks/efficiency.py [--rounds 20] [--batch 64] [--profile]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

from _harness import HERE, build, machine, run_testbed, warm_up, warm_up_torch_func
from plain_cnn import PlainCNN
from w1 import bare_loop

SCENARIO = HERE / "w1.yaml"
FLOPS_PER_MULTIPLY_ADD = 2
TARGET = 0.60


def matmul_peak(sizes=(1024, 2048, 4096), budget_s: float = 6.0) -> tuple[float, int]:
    """(best FLOP/s, at which size) of torch.mm on fp32 square matrices: sizes in turn until the budget is
    spent, so that a burst of load elsewhere cannot spoil every run of one size."""
    pairs = {n: (torch.randn(n, n), torch.randn(n, n)) for n in sizes}
    for a, b in pairs.values():
        torch.mm(a, b)  # first call: allocation, kernel selection
    best, best_n = 0.0, 0
    began = time.perf_counter()
    while time.perf_counter() - began < budget_s:
        for n, (a, b) in pairs.items():
            start = time.perf_counter()
            torch.mm(a, b)
            best, best_n = max((best, best_n), (2 * n**3 / (time.perf_counter() - start), n))
    return best, best_n


def profile_ops(fn, rows: int = 15) -> str:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--profile", action="store_true", help="torch.profiler table of one round of each run")
    args = parser.parse_args(argv)
    print(f"efficiency on {machine()}; load average {os.getloadavg()[0]:.2f}")
    overrides = [f"stop.max_rounds={args.rounds}", f"client.batch_size={args.batch}"]

    peak, n = matmul_peak()
    print(f"fp32 matmul peak: {peak / 1e9:.1f} GFLOP/s (torch.mm {n}x{n}, best run; measured again at the end)")
    warm_up(PlainCNN(), batch_size=args.batch)
    print(f"first torch.func call in this process: {warm_up_torch_func():.2f} s of one-time imports (not timed)")

    rows = []
    selection = None
    for kind in ("serial", "batched"):
        exp, why = build(SCENARIO, overrides + [f"executor.kind={kind}"])
        if exp is None:
            print(f"testbed {kind}: not available yet ({why})")
            continue
        run = run_testbed(exp)
        selection = selection or run.selection
        flops = FLOPS_PER_MULTIPLY_ADD * sum(r["flops"] for r in run.records)
        rows.append((f"testbed {kind}", flops, run.train_seconds, run.seconds, run.final_accuracy))

    exp, _ = build(SCENARIO, overrides)
    initial = {k: v.detach().clone() for k, v in exp.model.state_dict().items()}
    cfg = exp.scenario
    total_s, train_s, accuracies = bare_loop(initial, exp.dataset, exp.clients.train, selection, cfg.seed,
                                             cfg.client.lr, cfg.client.batch_size)
    rows.append(("bare PyTorch loop", rows[0][1], train_s, total_s, accuracies[-1]))
    again, n_again = matmul_peak(budget_s=3.0)
    if again > peak:
        print(f"fp32 matmul peak measured again: {again / 1e9:.1f} GFLOP/s ({n_again}x{n_again}); using it")
        peak = again

    print(f"\nW1 with batch {args.batch}, {args.rounds} rounds: {rows[0][1] / 1e9:.1f} GFLOP of training counted "
          f"(fvcore multiply-adds x 3 x samples x 2)")
    print("\n| run | training s | whole run s | GFLOP/s (training) | of peak | GFLOP/s (whole run) | of peak "
          "| final accuracy |")
    print("|---|---|---|---|---|---|---|---|")
    for name, flops, train, total, accuracy in rows:
        print(f"| {name} | {train:.2f} | {total:.2f} | {flops / train / 1e9:.1f} | {flops / train / peak:.1%} | "
              f"{flops / total / 1e9:.1f} | {flops / total / peak:.1%} | {accuracy:.4f} |")
    print(f"\ntarget: training at >= {TARGET:.0%} of the matmul peak; load average at the end "
          f"{os.getloadavg()[0]:.2f} (2 cores)")

    if args.profile:  # one round of training; evaluation on a single test digit, so that it does not count
        one_round = {1: selection[1]}
        quick = overrides + ["stop.max_rounds=1", "eval.max_samples=1"]
        for kind in ("serial", "batched"):
            exp, why = build(SCENARIO, quick + [f"executor.kind={kind}"])
            if exp is not None:
                print(f"\nprofile, testbed {kind}, one round:\n" + profile_ops(lambda: run_testbed(exp)))
        print("\nprofile, bare loop, one round:\n" + profile_ops(
            lambda: bare_loop(initial, exp.dataset, exp.clients.train, one_round, cfg.seed, cfg.client.lr,
                              cfg.client.batch_size, test_samples=1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
