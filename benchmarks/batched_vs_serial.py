"""Batched (torch.func.vmap) against serial training on CPU: where does stacking a round's clients win?

For each model and number of clients per round, the same jobs (FedAvg, 1 local epoch, the devices' own MNIST-5k
or synthetic samples, the same seeds) are trained by SerialExecutor and by BatchedExecutor, interleaved in this
one process, best of --repeat; printed: seconds of train() for each and batched / serial. Nothing but the
executors' train() is timed.

    python benchmarks/batched_vs_serial.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from _harness import HERE, build, machine
from testbed.algorithms.base import Task
from testbed.execution import BatchedExecutor, SerialExecutor, TrainJob
from testbed.payload import Dense

CASES = [  # (scenario, overrides, clients per round, batch size)
    ("w1.yaml", ["model.name=logreg"], 10, 10),
    ("w1.yaml", ["model.name=logreg"], 50, 10),
    ("w1.yaml", [], 10, 10),
    ("w1.yaml", [], 50, 10),
    ("w1.yaml", [], 10, 50),
    ("w1.yaml", ["model.name=cnn_fedlps"], 10, 10),
    ("w1.yaml", ["model.name=cnn_fedlps"], 50, 10),
    ("w1.yaml", ["model.name=lenet5"], 50, 10),
]


def jobs_of(exp, clients: int) -> list[TrainJob]:
    params = {n: p.detach().clone() for n, p in exp.model.named_parameters()}
    devices = [d for d in range(exp.fleet.n) if len(exp.clients.train[d])][:clients]
    return [TrainJob(Task(d, 1, len(exp.clients.train[d]), len(exp.clients.train[d]), Dense(), Dense()), params,
                     exp.clients.train[d], (0, 2, 1, d)) for d in devices]


def timed_train(executor, strategy, jobs) -> float:
    start = time.perf_counter()
    executor.train(strategy, jobs)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    print("| model | clients | batch | samples | serial s | batched s | batched / serial |")
    print("|---|---|---|---|---|---|---|")
    for scenario, overrides, clients, batch in CASES:
        exp, why = build(HERE / scenario, overrides + [f"client.batch_size={batch}"])
        if exp is None:
            print(f"| {overrides} | skipped: {why} |")
            continue
        jobs = jobs_of(exp, clients)
        serial, batched = SerialExecutor(exp.model, exp.dataset), BatchedExecutor(exp.model, exp.dataset)
        best = {"serial": np.inf, "batched": np.inf}
        for _ in range(args.repeat):  # interleaved; the first pass also warms both up
            best["serial"] = min(best["serial"], timed_train(serial, exp.strategy, jobs))
            best["batched"] = min(best["batched"], timed_train(batched, exp.strategy, jobs))
        print(f"| {exp.scenario.model.name} | {len(jobs)} | {batch} | {sum(len(j.indices) for j in jobs):,} "
              f"| {best['serial']:.2f} | {best['batched']:.2f} | {best['batched'] / best['serial']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
