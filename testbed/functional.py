"""A model as a function of its parameters: the parameter dict every layer of the testbed passes around
(`Params`), the loss a device trains on, and the scoring a server evaluates with.

`make_loss_fn(model)` is (params, x, y) -> (mean cross-entropy, the batch's accuracy), through
torch.func.functional_call, so the same model object serves any parameters (the server's, each device's, a submodel's
zeroed rows). `score` classifies every sample of (x, y) and sums the cross-entropy; `evaluate` is its
(accuracy, mean loss). Kept below both the algorithms (which train on the loss and score on the server's data) and
the executors (which evaluate), so that neither imports the other for them: it imports torch and numpy only.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call

Params = dict[str, torch.Tensor]
LossFn = Callable[[Params, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]  # -> (loss, accuracy)

# Evaluation runs the model on batches of EVAL_BATCH samples: on 2 CPU cores 100 was the fastest of 50..2000 for
# cnn_512, FedLPS's CNN and the Shakespeare LSTM (1.35-1.6x faster than 1000; benchmarks/RESULTS.md). The summed
# loss is still taken over blocks of LOSS_BLOCK logits, so that it is the very float it was with batches of 1000
# (a CPU forward pass gives each sample the same logits whatever the batch).
EVAL_BATCH = 100
LOSS_BLOCK = 1000
# On a GPU a batch is one launch of every layer whatever its size: batches of GPU_EVAL_BATCH keep it busy while a
# ResNet-18's activations of one batch stay under ~1 GB; the loss and the hits are summed there and read once.
GPU_EVAL_BATCH = 1000


def make_loss_fn(model: torch.nn.Module) -> LossFn:
    """(params, x, y) -> (mean cross-entropy, accuracy of the batch; no gradient flows through the latter)."""

    def loss_fn(params: Params, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = functional_call(model, params, (x,))
        return F.cross_entropy(logits, y), (logits.detach().argmax(1) == y).float().mean()

    return loss_fn


@torch.no_grad()
def logits(model: torch.nn.Module, params: Params, x: torch.Tensor, start: int, end: int) -> torch.Tensor:
    """The logits of samples start..end of x, in batches of EVAL_BATCH from `start`."""
    return torch.cat([functional_call(model, params, (x[s : min(s + EVAL_BATCH, end)],))
                      for s in range(start, end, EVAL_BATCH)])


@torch.no_grad()
def score(model: torch.nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor,
          all_logits: Callable[[Params, torch.Tensor], torch.Tensor] | None = None) -> tuple[np.ndarray, float]:
    """Whether each sample is classified right, and the summed cross-entropy; `all_logits`: where the logits of
    all of x are computed elsewhere (executor.workers), in the same batches."""
    if x.device.type != "cpu":
        return _score_on_device(model, params, x, y)
    every = None if all_logits is None else all_logits(params, x)   # worker processes' logits: the same floats
    correct, loss = [], 0.0
    for block in range(0, len(y), LOSS_BLOCK):
        end = min(block + LOSS_BLOCK, len(y))
        block_logits = logits(model, params, x, block, end) if every is None else every[block:end]
        target = y[block:end]
        loss += F.cross_entropy(block_logits, target, reduction="sum").item()
        correct.append((block_logits.argmax(1) == target).numpy())
    return np.concatenate(correct), loss


def _score_on_device(model: torch.nn.Module, params: Params, x: torch.Tensor,
                     y: torch.Tensor) -> tuple[np.ndarray, float]:
    """score() on a GPU: batches of GPU_EVAL_BATCH, the loss summed in float64 on the device (bf16 logits under
    autocast scored in float32), and one read of the results at the end."""
    correct = torch.empty(len(y), dtype=torch.bool, device=y.device)
    loss = torch.zeros((), dtype=torch.float64, device=y.device)
    for start in range(0, len(y), GPU_EVAL_BATCH):
        end = min(start + GPU_EVAL_BATCH, len(y))
        logits = functional_call(model, params, (x[start:end],)).float()
        loss += F.cross_entropy(logits, y[start:end], reduction="sum").double()
        correct[start:end] = logits.argmax(1) == y[start:end]
    return correct.cpu().numpy(), loss.item()   # the crossing to the host: the numbers that go into the tables


def evaluate(model: torch.nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor,
             all_logits: Callable[[Params, torch.Tensor], torch.Tensor] | None = None) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of `params` on (x, y) (`all_logits`: as score's)."""
    correct, loss = score(model, params, x, y, all_logits)
    return float(correct.mean()), loss / len(y)
