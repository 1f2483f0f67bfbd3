"""Training FLOPs, counted by fvcore on the real model.

Convention: a FLOP here is what fvcore and the papers count, one per multiply-add. Vendors quote peak FLOP/s
with two per fused multiply-add, so compute time = FLOPS_PER_MULTIPLY_ADD * flops / (peak * efficiency).
Training a sample costs 3x its forward pass (forward, plus backward for activations and for weights).
"""
from __future__ import annotations

import warnings

import torch

with warnings.catch_warnings():  # fvcore scripts a few helpers with torch.jit, which torch 2.x deprecates
    warnings.simplefilter("ignore", DeprecationWarning)
    from fvcore.nn import FlopCountAnalysis

TRAINING_FLOPS_PER_FORWARD = 3
FLOPS_PER_MULTIPLY_ADD = 2


def forward_flops_per_sample(model: torch.nn.Module, example: torch.Tensor) -> int:
    """fvcore's forward count for one sample (multiply-adds of convolutions, linear layers, matmuls...);
    `example` is one input sample with its batch dimension (float image or integer tokens)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            analysis = FlopCountAnalysis(model, example[:1])
            analysis.unsupported_ops_warnings(False)  # ReLU, pooling: cheap, and uncounted by the papers
            analysis.uncalled_modules_warnings(False)
            total = int(analysis.total())
    finally:
        model.train(was_training)
    if total <= 0:
        raise ValueError(f"fvcore counted {total} FLOPs for {type(model).__name__}; compute time would be zero")
    return total


def training_flops(forward_per_sample: int, samples_processed: int) -> int:
    return TRAINING_FLOPS_PER_FORWARD * forward_per_sample * samples_processed


def compute_seconds(flops: float, train_flops_per_s: float) -> float:
    """Simulated seconds to train `flops` (multiply-adds) on a device that sustains `train_flops_per_s`."""
    seconds = FLOPS_PER_MULTIPLY_ADD * flops / train_flops_per_s
    if not seconds > 0:  # a zero compute time hides a bug (APPFL #439): refuse it
        raise ValueError(f"computed compute time {seconds} s from {flops} FLOPs at {train_flops_per_s} FLOP/s")
    return seconds
