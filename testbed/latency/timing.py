"""Wall-time measurement on a machine that is not always as fast as itself.

A virtual machine on a shared host runs in phases: on the development VM the same training step took 2.2-2.4 ms
for seconds at a time, then 3.2-3.6 ms for seconds (cnn_fedlps at batch 10, timed 0.5 s apart over 40 s), and
medians of one network taken minutes apart differed by up to 2x. What is reproducible is the fastest of several
medians taken at different moments: over 8 rounds, three runs agreed within 5% on most networks. So a measurement
here is a median of a short burst (median_seconds), repeated in rounds that interleave all the networks being
measured, and each keeps the fastest of its rounds (Fastest). On a device of its own (a Raspberry Pi, a phone, a
laptop at rest) the rounds agree and cost only time.

A round visits the networks in its own shuffled order (in_round_order). Here slow phases follow the order: right
after VGG-16's and ResNet-18's steps the small steps ran 1.3-1.9x slow (back to 1.0x after 3 s idle), and in a
fidelity run with one fixed order its last 26 cases came out 1.1-1.7x their time in a fresh process in every one of
its four rounds (2026-11-30). A shuffled order gives a network other neighbours each round, so its fastest round is
likelier a clean one.
"""
from __future__ import annotations

import math
import random
import statistics
import time

import torch


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def synced_clock(device: str):
    """perf_counter after waiting for the device's queued work: a clock for one op's time."""
    def clock() -> float:
        sync(device)
        return time.perf_counter()

    return clock


def median_seconds(fn, device: str, budget_s: float, most: int = 25) -> float:
    """Median wall time of fn() over repeats that fit in budget_s (at least 3), after one warm-up call."""
    fn()
    sync(device)
    times: list[float] = []
    spent = 0.0
    while len(times) < 3 or (spent < budget_s and len(times) < most):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return statistics.median(times)


class Fastest:
    """The fastest of the rounds' values, by key (an op's index in its step, or the step itself)."""

    def __init__(self):
        self.best: dict = {}
        self.rounds = 0

    def add(self, values: dict) -> None:
        for key, seconds in values.items():
            self.best[key] = min(self.best.get(key, math.inf), seconds)
        self.rounds += 1


def in_round_order(items: list, round_number: int) -> list:
    """The items in round `round_number`'s order: a shuffle seeded by the round, the same on every run."""
    order = list(items)
    random.Random(round_number).shuffle(order)
    return order
