"""Where an executor trains (executor.device): the CPU, or a CUDA device when one is present.

The executor keeps its own copy of the model and of the training data on the device, moves each job's starting
point (parameters, optimizer state, the strategy's extras) there, and brings the trained parameters and state back
to the CPU, where the server aggregates and evaluates. On the CPU every move is a no-op.
On a GPU, training runs in IEEE float32 by deterministic kernels (exact_float32). Without it cuDNN computes the
larger convolutions in TF32 (a 10-bit mantissa) and may pick kernels that add in a varying order; measured on an
H200 (torch 2.11): quickstart's first round (cnn_512) was 1.6e-3 from the CPU's train loss in TF32 and 7e-9 in
float32, and two runs of one scenario with the batched executor differed from round 2 on; with it, two runs give
the same tables. A GPU's results still match the CPU's within float tolerance only, not bit for bit (other
kernels, other summation orders), and later rounds compound the differences: quickstart's 60 rounds ended at
0.958 against the CPU's 0.960.
"""
from __future__ import annotations

import copy
from contextlib import contextmanager
from typing import Any, Iterator

import torch

from testbed.errors import TestbedError

CPU = torch.device("cpu")


def training_device(name: str) -> torch.device:
    """The torch device for executor.device, checked: 'cuda' needs a CUDA device that torch can see here."""
    if name == "cuda" and not torch.cuda.is_available():
        raise TestbedError("executor.device: cuda, but torch sees no CUDA device on this machine "
                           "(a CPU build of torch, or no GPU); set executor.device: cpu")
    return torch.device(name)


@contextmanager
def exact_float32(device: torch.device) -> Iterator[None]:
    """Within it, training on `device` computes in IEEE float32 by deterministic kernels: on a GPU, cuDNN without
    TF32 and without benchmarking, and float32 matrix products at torch's "highest" precision; the process's own
    settings come back after (a user's code in the same process keeps its choice). On the CPU: nothing to do."""
    if device.type != "cuda":
        yield
        return
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True, allow_tf32=False):
            yield
    finally:
        torch.set_float32_matmul_precision(precision)


def model_on(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """The model whose buffers the executor's forward passes use: the engine's own on the CPU, a copy elsewhere."""
    return model if device == CPU else copy.deepcopy(model).to(device)


def moved(value: Any, device: torch.device) -> Any:
    """`value` with every tensor in it (through dicts, lists and tuples) on `device`."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: moved(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(moved(v, device) for v in value)
    return value
