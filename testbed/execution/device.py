"""Where an executor trains (executor.device): the CPU, or a CUDA device when one is present.

The executor keeps its own copy of the model and of the training data on the device, moves each job's starting
point (parameters, optimizer state, the strategy's extras) there, and brings the trained parameters and state back
to the CPU, where the server aggregates and evaluates. On the CPU every move is a no-op. Results on a GPU match
the CPU's within float tolerance, not bit for bit (other kernels, other summation orders).
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


def moved(value: Any, device: torch.device) -> Any:
    """`value` with every tensor in it (through dicts, lists and tuples) on `device`."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: moved(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(moved(v, device) for v in value)
    return value
