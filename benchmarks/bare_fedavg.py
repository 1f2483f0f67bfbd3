"""The bare PyTorch loop of benchmarks/gpu.py, for any model and device: what a researcher writes by hand.

Data and test set are moved to the device once; every selected client trains from the global weights with
torch.optim.SGD on its own samples, in the testbed's minibatch order (plain_cnn.shuffling_rng: one permutation a
epoch from the (device, round) stream); the global model is the sample-weighted mean of the trained models and is
evaluated on the whole test set after every round, with one host sync a round (the accuracy and loss). Nothing
of the testbed in it but the seed rule and, for exact precision, the testbed's own float32 flags, so that both
sides compute the same arithmetic.

Precision modes (what a hand-written loop would switch on):
  exact  testbed.execution.precision.exact_float32: IEEE float32, deterministic cuDNN, no TF32
  tf32   cuDNN and matrix products in TF32, cuDNN benchmarking (autotuned kernels, not deterministic)
  bf16   tf32's flags plus torch.autocast(bfloat16) around each forward pass, in training and evaluation
"""
from __future__ import annotations

import copy
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import torch
import torch.nn.functional as F

from plain_cnn import shuffling_rng
from testbed.execution.precision import exact_float32

PRECISIONS = ("exact", "tf32", "bf16")


@contextmanager
def precision_flags(precision: str, device: torch.device) -> Iterator[None]:
    """The process's arithmetic flags for `precision` within the block; the earlier ones come back after.
    bf16's autocast is not here: see autocast()."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision '{precision}'; choose one of: {', '.join(PRECISIONS)}")
    if precision == "exact":
        with exact_float32(device):
            yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # TF32 matrix products where the device has them
    try:
        with torch.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=False, allow_tf32=True) \
                if device.type == "cuda" else nullcontext():
            yield
    finally:
        torch.set_float32_matmul_precision(before)


def autocast(precision: str, device: torch.device):
    """Around each forward pass, not around the run: autocast keeps its bfloat16 copies of the weights until
    its block ends, so a block around many optimizer steps would train on the first step's weights for ever."""
    return torch.autocast(device.type, dtype=torch.bfloat16) if precision == "bf16" else nullcontext()


class OutOfTime(Exception):
    """Raised by a time budget (a stop rule, or an alarm in the middle of a round): the run keeps its finished
    rounds."""


@dataclass
class Timed:
    """One run's clock: perf_counter at its start and at the end of each round (after evaluation's sync), the
    seconds of training in each round, and the evaluation after each round."""

    start: float
    round_ends: list[float] = field(default_factory=list)
    train_seconds: list[float] = field(default_factory=list)
    accuracies: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    selection: dict[int, list[int]] = field(default_factory=dict)
    stopped_early: bool = False

    @property
    def rounds(self) -> int:
        return len(self.round_ends)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def fedavg(model: torch.nn.Module, initial: dict[str, torch.Tensor], data, clients: list[np.ndarray],
           selection: dict[int, list[int]], seed: int, lr: float, batch_size: int, epochs: int, eval_batch: int,
           device: torch.device, precision: str = "exact", stop=lambda timed: False) -> Timed:
    """FedAvg's rounds in `selection` (round -> devices) on `device`. `stop(timed)`, asked after each round, ends
    the run early (a time budget), as does OutOfTime raised from anywhere within (an alarm). Moving the data to
    the device happens before the clock starts, as the testbed's executor moves its data when it is built."""
    model = copy.deepcopy(model).to(device)
    model.load_state_dict(initial)
    params = list(model.parameters())
    global_ = [p.detach().clone() for p in params]
    train_x, train_y = data.train_x.to(device), data.train_y.to(device)
    test_x, test_y = data.test_x.to(device), data.test_y.to(device)
    index = {d: torch.from_numpy(clients[d]).to(device) for r in selection for d in selection[r]}
    optimizer = torch.optim.SGD(params, lr=lr)

    def train(d: int, r: int) -> int:
        """Client d's local epochs of round r from the global weights; its sample count."""
        with torch.no_grad():
            torch._foreach_copy_(params, global_)
        x, y = train_x[index[d]], train_y[index[d]]
        rng = shuffling_rng(seed, r, int(d))
        for _ in range(epochs):
            order = torch.from_numpy(rng.permutation(len(y))).to(device)  # one host-to-device copy an epoch
            for batch in order.split(batch_size):
                optimizer.zero_grad(set_to_none=True)
                with autocast(precision, device):
                    loss = F.cross_entropy(model(x[batch]), y[batch])
                loss.backward()
                optimizer.step()
        return len(y)

    _sync(device)
    timed = Timed(time.perf_counter())
    try:
        with precision_flags(precision, device):
            for r in sorted(selection):
                began = time.perf_counter()
                summed, total = [torch.zeros_like(g) for g in global_], 0
                model.train()
                for d in selection[r]:
                    n = train(d, r)
                    with torch.no_grad():
                        torch._foreach_add_(summed, [p.detach() for p in params], alpha=n)
                    total += n
                global_ = torch._foreach_div(summed, total)
                with torch.no_grad():
                    torch._foreach_copy_(params, global_)
                _sync(device)
                timed.train_seconds.append(time.perf_counter() - began)
                with autocast(precision, device):
                    accuracy, loss = evaluate(model, test_x, test_y, eval_batch)  # the round's one sync
                timed.round_ends.append(time.perf_counter())
                timed.accuracies.append(accuracy)
                timed.losses.append(loss)
                timed.selection[r] = list(selection[r])
                if r != max(selection) and stop(timed):
                    raise OutOfTime
    except OutOfTime:
        timed.stopped_early = True
    return timed


@torch.no_grad()
def evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) on (x, y) in batches of `batch`, summed on the device, read once."""
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=x.device)
    loss = torch.zeros((), dtype=torch.float64, device=x.device)
    for xb, yb in zip(x.split(batch), y.split(batch)):
        logits = model(xb).float()
        correct += (logits.argmax(1) == yb).sum()
        loss += F.cross_entropy(logits, yb, reduction="sum").double()
    model.train()
    return int(correct.item()) / len(y), float(loss.item()) / len(y)
