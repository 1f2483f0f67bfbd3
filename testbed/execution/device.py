"""Where a run computes (executor.device): the CPU, or a CUDA device when one is present.

The executor keeps its own copy of the model and of the training data on the device and moves each job's
starting point (parameters, optimizer state, the strategy's extras) there. The trained parameters go back to
where the job's parameters came from: the device itself where the server lives there too (a strategy that says
SERVER_ON_DEVICE, testbed/execution/placement.py), the CPU otherwise. On the CPU every move is a no-op.
The arithmetic on a GPU (exact float32 by default, or TF32 / bf16) is testbed/execution/precision.py's.
"""
from __future__ import annotations

import copy
from typing import Any

import torch

from testbed.errors import TestbedError

CPU = torch.device("cpu")


def training_device(name: str) -> torch.device:
    """The torch device for executor.device, checked: 'cuda' needs a CUDA device that torch can see here."""
    if name == "cuda" and not torch.cuda.is_available():
        raise TestbedError("executor.device: cuda, but torch sees no CUDA device on this machine "
                           "(a CPU build of torch, or no GPU); set executor.device: cpu")
    return torch.device(name)


def model_on(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """The model whose buffers the executor's forward passes use: the engine's own on the CPU, a copy elsewhere."""
    return model if device == CPU else copy.deepcopy(model).to(device)


def home_of(params: dict) -> torch.device:
    """The device of a dict of tensors (the CPU where it holds none)."""
    return next((t.device for t in params.values() if isinstance(t, torch.Tensor)), CPU)


def moved(value: Any, device: torch.device) -> Any:
    """`value` with every tensor in it (through dicts, lists and tuples) on `device`."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: moved(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(moved(v, device) for v in value)
    return value
