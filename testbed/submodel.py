"""Unit masks for submodel methods, the weight-update masks they imply, and the FLOPs of the submodel.

A unit is one row (dim 0) of a prunable weight (testbed/models/units.py: every Conv/Linear/LSTM/Embedding weight
except the classifier). Every layer keeps the same fraction `ratio` of its units, k = keep_count(n, ratio)
(FedLPS code's k_layer = max(int(s * n_units), 1), specs/fedlps.md §1.1). Which k units, per pattern:

- "ordered":   the first k units. HeteroFL (Diao et al., ICLR'21) and FjORD's ordered dropout (Horvath et al.,
               NeurIPS'21).
- "rolling":   k consecutive units starting at `round % n`, wrapping around. FedRolex (Alam et al., NeurIPS'22).
- "random":    k units drawn uniformly without replacement with a numpy Generator. eFD, extended Federated
               Dropout (as defined in the FjORD paper).
- "magnitude": the k units whose weight rows have the largest L1 norm. FedMP (Jiang et al., ICDE'22).
- "learnable": the top-k of the unit-wise importance scores Q (the per-layer (1-s)-quantile threshold of FedLPS
               eq. 4-5, Xue et al.); ties broken by the lower index.

`update_mask` broadcasts a unit mask over its weight row (FedLPS masks weights only, never biases or norms).

`submodel_flops` counts the forward multiply-adds of the submodel, per layer from fvcore's per-module counts:
- structured=False (mask-only, FedLPS): each masked layer's FLOPs scale by its kept fraction of output units
  (FedLPS §3: "output-unit masking scales FLOPs by about s, not s^2").
- structured=True (HeteroFL / FjORD / FedRolex / eFD / FedMP, which really shrink the network): a Conv/Linear
  layer's FLOPs also scale by the fraction of its INPUT units still alive. Those are found generically by a
  forward pass through a copy of the model whose pruned weight rows and biases are zeroed (kept weights made
  positive, random positive inputs, so no live feature is zero by chance through ReLU), with forward hooks
  recording which input channels (Conv: dim 1) / input features (Linear: last dim) are identically zero. A
  BatchNorm/GroupNorm whose input channel is dead is forced to output zero there (its bias would otherwise
  revive it), and its fvcore per-element charge scales by its live channels. LayerNorm/InstanceNorm are
  neither silenced nor scaled (their bias may revive dead features, so later layers may be over-counted).
  This supports feed-forward conv/linear models (including residual ones); recurrent models raise
  NotImplementedError.
"""
from __future__ import annotations

import copy
from fractions import Fraction
from typing import Mapping

import numpy as np
import torch
from torch import nn

from testbed.flops import flop_counts

_CHANNEL_NORMS = (nn.modules.batchnorm._BatchNorm, nn.GroupNorm)  # per-channel affine on dim 1
PATTERNS = ("ordered", "rolling", "random", "magnitude", "learnable")


def keep_count(n_units: int, ratio: float) -> int:
    """Units a layer of n_units keeps at `ratio` (FedLPS code's k_layer)."""
    return max(int(ratio * n_units), 1)


def _top_k(values: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the k largest values; ties go to the lower index."""
    order = torch.argsort(-values.detach().double().flatten(), stable=True)
    return order[:k]


def unit_masks(params: Mapping[str, torch.Tensor], units: Mapping[str, int], ratio: float, pattern: str,
               rng: np.random.Generator | None = None, round: int = 0,
               scores: Mapping[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """Per prunable weight name in `units`, a (n_units,) bool keep mask with keep_count(n_units, ratio) True.

    params: weight name -> tensor (e.g. dict(model.named_parameters())); used by "magnitude".
    rng: numpy Generator, required by "random". round: the round counter of "rolling".
    scores: weight name -> (n_units,) importance scores, required by "learnable".
    """
    if pattern not in PATTERNS:
        raise ValueError(f"unknown submodel pattern {pattern!r}; choices: {', '.join(PATTERNS)}")
    if pattern == "random" and rng is None:
        raise ValueError("pattern 'random' needs rng (a numpy Generator)")
    if pattern == "learnable" and scores is None:
        raise ValueError("pattern 'learnable' needs scores (weight name -> per-unit scores)")
    masks: dict[str, torch.Tensor] = {}
    for name, n in units.items():
        n = int(n)
        k = min(keep_count(n, ratio), n)
        if pattern == "ordered":
            idx = torch.arange(k)
        elif pattern == "rolling":
            idx = (torch.arange(k) + int(round) % n) % n
        elif pattern == "random":
            idx = torch.as_tensor(rng.choice(n, size=k, replace=False), dtype=torch.long)
        elif pattern == "magnitude":
            weight = params[name]
            if weight.shape[0] != n:
                raise ValueError(f"{name}: {weight.shape[0]} rows, but units says {n}")
            idx = _top_k(weight.detach().abs().reshape(n, -1).sum(1), k)
        else:  # learnable
            score = torch.as_tensor(scores[name]).flatten()
            if score.numel() != n:
                raise ValueError(f"{name}: {score.numel()} scores for {n} units")
            idx = _top_k(score, k)
        mask = torch.zeros(n, dtype=torch.bool)
        mask[idx] = True
        masks[name] = mask
    return masks


def update_mask(params: Mapping[str, torch.Tensor], masks: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """0/1 tensors of each masked weight's shape and dtype: unit j's row is all ones if kept, zeros if pruned."""
    out = {}
    for name, mask in masks.items():
        weight = params[name]
        if mask.numel() != weight.shape[0]:
            raise ValueError(f"{name}: mask of {mask.numel()} units for a weight of {weight.shape[0]} rows")
        dtype = weight.dtype if weight.is_floating_point() else torch.float32
        row = mask.to(device=weight.device, dtype=dtype).reshape(-1, *([1] * (weight.dim() - 1)))
        out[name] = row.expand_as(weight).clone()
    return out


def _owners(model: nn.Module, masks: Mapping[str, torch.Tensor]) -> dict[str, list[tuple[str, torch.Tensor]]]:
    """Module name -> [(parameter name within it, unit mask)] for every masked weight."""
    params = dict(model.named_parameters())
    owners: dict[str, list[tuple[str, torch.Tensor]]] = {}
    for name, mask in masks.items():
        if name not in params:
            raise KeyError(f"masked weight {name!r} is not a parameter of {type(model).__name__}")
        module_name, _, local = name.rpartition(".")
        owners.setdefault(module_name, []).append((local, mask))
    return owners


def _density(module: nn.Module, entries: list[tuple[str, torch.Tensor]]) -> Fraction:
    """Kept fraction of a module's masked weights, by element (kept/out for a single weight)."""
    kept = total = 0
    for local, mask in entries:
        weight = getattr(module, local)
        row = weight[0].numel() if weight.dim() > 1 else 1
        kept += int(mask.sum()) * row
        total += mask.numel() * row
    return Fraction(kept, total)


def _live_inputs(model: nn.Module, example: torch.Tensor, owners, modules: dict[str, nn.Module],
                 samples: int = 8) -> dict[str, tuple[int, int]]:
    """Conv/Linear module name -> (live input units, input units) in the zeroed copy of the model."""
    probe = copy.deepcopy(model).eval()
    probe_modules = dict(probe.named_modules())
    with torch.no_grad():
        for module in probe.modules():  # kept weights positive, so ReLU kills no live feature by chance
            if isinstance(module, (nn.Linear, nn.modules.conv._ConvNd)):
                module.weight.abs_().add_(1e-3)
                if module.bias is not None:
                    module.bias.abs_()
        for module_name, entries in owners.items():
            module = probe_modules[module_name]
            for local, mask in entries:
                dead = ~mask.to(torch.bool)
                getattr(module, local)[dead] = 0
                bias_name = "bias" if local == "weight" else None
                bias = getattr(module, bias_name, None) if bias_name else None
                if isinstance(bias, torch.Tensor) and bias.shape[:1] == mask.shape:
                    bias[dead] = 0
    live: dict[str, tuple[int, int]] = {}
    hooks = []

    def record(name, dim):
        def hook(module, inputs, output):
            x = inputs[0].detach()
            d = dim % x.dim()
            per_unit = x.abs().transpose(0, d).reshape(x.shape[d], -1).sum(1)
            live[name] = (int((per_unit != 0).sum()), int(x.shape[d]))
        return hook

    def silence_dead_channels(module, inputs, output):
        x = inputs[0]
        alive = x.abs().transpose(0, 1).reshape(x.shape[1], -1).sum(1) != 0
        shape = [1, -1] + [1] * (output.dim() - 2)
        return output * alive.to(output.dtype).reshape(shape)

    for name, module in probe.named_modules():
        if name not in modules:
            continue
        if isinstance(module, (nn.modules.conv._ConvNd, _CHANNEL_NORMS)):
            hooks.append(module.register_forward_hook(record(name, 1)))
        elif isinstance(module, nn.Linear):
            hooks.append(module.register_forward_hook(record(name, -1)))
    for module in probe.modules():
        if isinstance(module, _CHANNEL_NORMS):
            hooks.append(module.register_forward_hook(silence_dead_channels))  # runs after `record`
    if example.is_floating_point():
        batch = torch.rand(samples, *example.shape[1:], dtype=example.dtype) + 0.1
    else:
        batch = example[:1].repeat(samples, *([1] * (example.dim() - 1)))
    try:
        with torch.no_grad():
            probe(batch)
    finally:
        for h in hooks:
            h.remove()
    return live


def submodel_flops(model: nn.Module, example: torch.Tensor, masks: Mapping[str, torch.Tensor],
                   structured: bool) -> int:
    """Forward multiply-adds per sample of `model` with unit `masks` (weight name -> (n_units,) bool).

    structured=False: each masked module's fvcore count x its kept fraction of output units.
    structured=True: each Conv/Linear module's count x kept_out/out x live_in/in (the shrunk network), each
    Batch/GroupNorm's count x its live channel fraction; other counted ops (LayerNorm, ops outside modules)
    are kept at full cost. Feed-forward conv/linear models only.
    `example` is one input sample with its batch dimension.
    """
    if structured and any(isinstance(m, nn.RNNBase) for m in model.modules()):
        raise NotImplementedError(
            "structured submodel FLOPs support feed-forward conv/linear models only; "
            f"{type(model).__name__} has a recurrent layer (use structured=False, or count the shrunk model)")
    owners = _owners(model, masks)
    modules = dict(model.named_modules())
    total, by_module = flop_counts(model, example)
    if not structured:
        flops = Fraction(total)
        for module_name, entries in owners.items():
            full = by_module.get(module_name, 0)
            flops -= full * (1 - _density(modules[module_name], entries))
        return int(round(flops))
    layers = {name: m for name, m in modules.items()
              if isinstance(m, (nn.Linear, nn.modules.conv._ConvNd, _CHANNEL_NORMS))}
    live = _live_inputs(model, example, owners, layers)
    flops = Fraction(total)
    for name, module in layers.items():
        full = by_module.get(name, 0)
        if full == 0:
            continue
        scale = _density(module, owners[name]) if name in owners else Fraction(1)
        if name in live:
            alive, n_in = live[name]
            scale *= Fraction(alive, n_in)
        flops -= full * (1 - scale)
    return int(round(flops))
