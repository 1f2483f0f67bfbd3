"""Benchmark W1: FedAvg, MNIST-5k, 100 clients Dirichlet(0.5), 10 per round, cnn_512, 1 local epoch, batch 10,
lr 0.05, 20 rounds (benchmarks/w1.yaml), run four ways in this one process:

  bare      a plain PyTorch loop: nn.Module + torch.optim.SGD per selected client, sample-weighted FedAvg,
            evaluation on the 1,000 test digits after each round
  serial    the testbed, executor.kind=serial
  batched   the testbed, executor.kind=batched (skipped, with a note, while it does not exist)
  flower    Flower's simulation (start_simulation, Ray backend, 2 CPUs), benchmarks/flower_w1.py

All four train the same clients (the testbed's partition and, per round, the devices the serial run
trained), from the same initial weights, in the same sample order (the testbed's (device, round) seeds), and
evaluate after every round. Timed with time.perf_counter: for the testbed, Engine(...) + run() (FLOP
counting, clock simulation, training, aggregation, evaluation); for the bare loop, its rounds; for Flower,
start_simulation() (actor pool, rounds, evaluation; ray.init and putting the data into Ray's object store are
timed apart). Not timed anywhere: importing, loading MNIST-5k, partitioning.

    python benchmarks/w1.py [--rounds 20] [--repeat 1] [--no-flower]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

from _harness import HERE, build, machine, ratio, run_testbed, seconds, warm_up, warm_up_torch_func
from plain_cnn import TRAINING_STREAM, PlainCNN, fedavg
from testbed.scenario import Purpose

SCENARIO = HERE / "w1.yaml"


def bare_loop(initial: dict[str, torch.Tensor], data, train_indices, selection: dict[int, list[int]], seed: int,
              lr: float, batch_size: int, epochs: int = 1, test_samples: int | None = None
              ) -> tuple[float, float, list[float]]:
    """Returns (seconds, of which training, accuracy after each round); `test_samples` evaluates on the first
    few test digits only (for profiles of training)."""
    start = time.perf_counter()
    accuracies, train_s = fedavg(initial, data.train_x, data.train_y, train_indices, selection, seed, lr, batch_size,
                                 data.test_x[:test_samples], data.test_y[:test_samples], epochs)
    return time.perf_counter() - start, train_s, accuracies


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=1, help="runs of bare/serial/batched; the best is kept")
    parser.add_argument("--no-flower", action="store_true")
    args = parser.parse_args(argv)
    assert Purpose.TRAINING == TRAINING_STREAM
    overrides = [f"stop.max_rounds={args.rounds}"]

    print(f"W1 on {machine()}; load average {os.getloadavg()[0]:.2f}")
    warm_up(PlainCNN())
    print(f"first torch.func call in this process: {warm_up_torch_func():.2f} s of one-time imports (not timed)")
    times: dict[str, float | None] = {"bare": None, "serial": None, "batched": None, "flower": None}
    acc: dict[str, list[float]] = {}
    notes = []

    exp, why = build(SCENARIO, overrides)
    if exp is None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    initial = {k: v.detach().clone() for k, v in exp.model.state_dict().items()}
    cfg = exp.scenario
    batched_overrides = overrides + ["executor.kind=batched"]
    probe, why = build(SCENARIO, batched_overrides)
    if probe is None:
        notes.append(f"testbed batched: not available yet ({why})")
        batched_overrides = None
    else:
        probe.executor.close()
    serial = batched = bare = None
    for _ in range(args.repeat):  # interleaved, so that a burst of load elsewhere hits one attempt of each
        run = run_testbed(build(SCENARIO, overrides)[0])
        print(f"serial:  {run.seconds:.2f} s (Engine() {run.setup_seconds:.2f} s, executor.train "
              f"{run.train_seconds:.2f} s)")
        serial = run if serial is None or run.seconds < serial.seconds else serial
        selection = serial.selection
        assert all(len(v) == cfg.round.clients_per_round for v in selection.values()), "W1 keeps every device"
        result = bare_loop(initial, exp.dataset, exp.clients.train, selection, cfg.seed, cfg.client.lr,
                           cfg.client.batch_size)
        print(f"bare:    {result[0]:.2f} s (training {result[1]:.2f} s)")
        bare = result if bare is None or result[0] < bare[0] else bare
        if batched_overrides is not None:
            run = run_testbed(build(SCENARIO, batched_overrides)[0])
            print(f"batched: {run.seconds:.2f} s (Engine() {run.setup_seconds:.2f} s, executor.train "
                  f"{run.train_seconds:.2f} s)")
            if run.selection != selection:
                notes.append("batched trained other devices than serial: selection must not depend on the executor")
            batched = run if batched is None or run.seconds < batched.seconds else batched
    times["serial"], acc["serial"] = serial.seconds, serial.accuracies
    times["bare"], acc["bare"] = bare[0], bare[2]
    if batched is not None:
        times["batched"], acc["batched"] = batched.seconds, batched.accuracies
    for note in notes:
        print(note)

    flower = None
    if args.no_flower:
        notes.append("Flower: skipped (--no-flower)")
    else:
        try:
            from flower_w1 import run_flower
            flower = run_flower(initial, exp.dataset, exp.clients.train, selection, cfg.seed, cfg.client.lr,
                                cfg.client.batch_size, args.rounds)
        except ImportError as err:
            notes.append(f"Flower: not installed ({err}); pip install -e '.[bench]'")
        if flower is not None:
            times["flower"], acc["flower"] = flower["seconds"], flower["accuracies"]
            print(f"flower:  {flower['seconds']:.2f} s start_simulation (rounds alone {flower['rounds_s']:.2f} s; "
                  f"ray.init {flower['ray_init_s']:.2f} s apart); flwr {flower['version']}, ray "
                  f"{flower['ray_version']}")

    print("\n| run | seconds | final accuracy |")
    print("|---|---|---|")
    for name, label in (("bare", "bare PyTorch loop"), ("serial", "testbed serial"), ("batched", "testbed batched"),
                        ("flower", "Flower simulation")):
        final = f"{acc[name][-1]:.4f}" if name in acc else "-"
        print(f"| {label} | {seconds(times[name])} | {final} |")
    print("\n| ratio | value | target |")
    print("|---|---|---|")
    print(f"| testbed serial / bare loop | {ratio(times['serial'], times['bare'])} | <= 1.05x |")
    print(f"| bare loop / testbed batched | {ratio(times['bare'], times['batched'])} | >= 2x |")
    print(f"| Flower / testbed batched | {ratio(times['flower'], times['batched'])} | >= 10x |")
    print(f"| Flower / testbed serial | {ratio(times['flower'], times['serial'])} | (for reference) |")
    if flower is not None:
        print(f"| Flower rounds only / testbed batched | {ratio(flower['rounds_s'], times['batched'])} | |")
        print(f"| Flower rounds only / testbed serial | {ratio(flower['rounds_s'], times['serial'])} | |")
    reference = np.asarray(acc["bare"])
    print("\naccuracy agreement with the bare loop, over all rounds:")
    for name in ("serial", "batched", "flower"):
        if name in acc:
            gap = np.abs(np.asarray(acc[name]) - reference)
            print(f"  {name}: max |difference| {gap.max():.4f} (round {int(gap.argmax()) + 1}), final "
                  f"{acc[name][-1]:.4f} vs {reference[-1]:.4f}")
    for note in notes:
        print(f"note: {note}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (2 cores: above 2, other processes competed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
