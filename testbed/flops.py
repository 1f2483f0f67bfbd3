"""Training FLOPs, counted by fvcore on the real model.

Convention: a FLOP here is what fvcore and the papers count, one per multiply-add. Vendors quote peak FLOP/s
with two per fused multiply-add, so compute time = FLOPS_PER_MULTIPLY_ADD * flops / (peak * efficiency).
Training a sample costs 3x its forward pass (forward, plus backward for activations and for weights).
fvcore has no rule for recurrent layers; `recurrent_flop_jit` below adds one (aten::lstm, gru, rnn_tanh, rnn_relu).
Embedding lookups count 0 (fvcore skips aten::embedding), as do bias adds, activations and max pooling.
"""
from __future__ import annotations

import warnings

import torch

with warnings.catch_warnings():  # fvcore scripts a few helpers with torch.jit, which torch 2.x deprecates
    warnings.simplefilter("ignore", DeprecationWarning)
    from fvcore.nn import FlopCountAnalysis
    from fvcore.nn.jit_handles import get_shape

TRAINING_FLOPS_PER_FORWARD = 3
FLOPS_PER_MULTIPLY_ADD = 2


def recurrent_flop_jit(inputs, outputs) -> int:
    """fvcore handle for aten::lstm / gru / rnn_tanh / rnn_relu: the multiply-adds of the gate matmuls.

    Each time step of each layer (and direction) multiplies its input by W_ih and its previous hidden state by
    W_hh, so an LSTM layer costs 4H*(input + H) per step (GRU 3H*(input + H), plain RNN H*(input + H)), plus
    P*H for a projection W_hr. That is: (sequence steps x batch) x the element count of every 2-D weight in
    the op's parameter list. Not counted, as fvcore does not count them for linear layers either: bias adds,
    the gate nonlinearities and the elementwise cell/hidden updates (about 10*H per step and layer, 1% or
    less of the matmuls for the testbed's LSTMs). Works for batch-first, sequence-first, unbatched and packed inputs:
    the first input's leading dimensions hold every (step, sample) pair the recurrence visits.
    """
    steps_x_batch = 1
    for d in get_shape(inputs[0])[:-1]:
        steps_x_batch *= d
    lists = [v for v in inputs[1:] if str(v.type()) == "List[Tensor]"]
    params = lists[-1].node().inputs() if lists else []  # lstm: (hx list, params list); gru/rnn: params list
    per_step = 0
    for p in params:
        shape = get_shape(p)
        if shape is not None and len(shape) == 2:
            per_step += shape[0] * shape[1]
    return steps_x_batch * per_step


RECURRENT_OPS = ("aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu")


def flop_counts(model: torch.nn.Module, example: torch.Tensor) -> tuple[int, dict[str, int]]:
    """fvcore's forward count for one sample, in all and by module name (multiply-adds of convolutions,
    linear layers, matmuls, recurrent gate matmuls; fvcore also charges normalization layers 2 to 5 per
    element); `example` is one input sample with its batch dimension (float image or integer tokens)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            analysis = FlopCountAnalysis(model, example[:1])
            for op in RECURRENT_OPS:
                analysis.set_op_handle(op, recurrent_flop_jit)
            analysis.unsupported_ops_warnings(False)  # ReLU, pooling: cheap, and uncounted by the papers
            analysis.uncalled_modules_warnings(False)
            return int(analysis.total()), {name: int(n) for name, n in analysis.by_module().items()}
    finally:
        model.train(was_training)


def forward_flops_per_sample(model: torch.nn.Module, example: torch.Tensor) -> int:
    """The model's forward multiply-adds for one sample (flop_counts' total); zero is refused."""
    total, _ = flop_counts(model, example)
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
