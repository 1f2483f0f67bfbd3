"""The dense network a device of a structured submodel method really runs: the model with only the kept rows and
columns of each parameter (a UnitMasked payload's `masks` and `columns`, from submodel.structure), every layer's
sizes set to match, so that its step can be traced at its own shapes.

A Conv/Linear weight loses its dropped rows (output units) and columns (input units), its bias the same rows; a
Batch-/GroupNorm its dropped channels, running statistics included (a GroupNorm keeps the largest group count
that still divides its channels: the time of the normalisation is what counts, not its grouping). Any other masked
parameter loses its dropped rows.
"""
from __future__ import annotations

import copy
import math
from typing import Mapping

import torch
from torch import nn

_CHANNEL_NORMS = (nn.modules.batchnorm._BatchNorm, nn.GroupNorm)


def _sliced(t: torch.Tensor, rows: torch.Tensor | None, columns: torch.Tensor | None) -> torch.Tensor:
    if rows is not None:
        t = t[rows.bool()]
    if columns is not None and t.dim() > 1:
        t = t[:, columns.bool()]
    return t


def shape_key(rows: Mapping[str, torch.Tensor], columns: Mapping[str, torch.Tensor]) -> tuple:
    """What the shrunk network's shapes depend on: the kept counts (which units are kept does not change a time)."""
    return (tuple(sorted((n, int(m.sum())) for n, m in rows.items())),
            tuple(sorted((n, int(m.sum())) for n, m in columns.items())))


def _resize(module: nn.Module) -> None:
    """Set a layer's size attributes from its (sliced) parameters."""
    if isinstance(module, nn.modules.conv._ConvNd):
        module.out_channels = module.weight.shape[0]
        module.in_channels = module.weight.shape[1] * module.groups
    elif isinstance(module, nn.Linear):
        module.out_features, module.in_features = module.weight.shape
    elif isinstance(module, nn.modules.batchnorm._BatchNorm) and module.weight is not None:
        module.num_features = module.weight.shape[0]
    elif isinstance(module, nn.GroupNorm) and module.weight is not None:
        module.num_channels = module.weight.shape[0]
        module.num_groups = math.gcd(module.num_groups, module.num_channels)


def shrunk(model: nn.Module, rows: Mapping[str, torch.Tensor], columns: Mapping[str, torch.Tensor]) -> nn.Module:
    """A copy of `model` holding only the kept rows and columns of each parameter."""
    out = copy.deepcopy(model)
    with torch.no_grad():
        for module_name, module in out.named_modules():
            prefix = module_name + "." if module_name else ""
            changed = False
            for local, param in list(module.named_parameters(recurse=False)):
                name = prefix + local
                if name in rows or name in columns:
                    setattr(module, local, nn.Parameter(_sliced(param, rows.get(name), columns.get(name))))
                    changed = True
            if changed and isinstance(module, _CHANNEL_NORMS):
                keep = rows.get(prefix + "weight")
                for buffer in ("running_mean", "running_var"):
                    if keep is not None and getattr(module, buffer, None) is not None:
                        setattr(module, buffer, getattr(module, buffer)[keep.bool()])
            if changed:
                _resize(module)
    return out
