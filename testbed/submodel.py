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

`submodel_flops` counts the forward multiply-adds of the submodel. One rule serves every method, DisPFL's counter,
which FedLPS cites: a layer costs its dense count x the share of its weights the device holds and trains. For a
Conv/Linear layer that share is (kept output units / units) x (live input units / inputs), and a unit of layer l
removes an input of layer l+1 only where the method removes the unit whole. The methods differ only in what they
remove:
- FedLPS masks weight rows and keeps biases, so a masked unit still feeds its bias forward. Layer l+1 keeps all
  its inputs, and a layer's FLOPs scale by its kept outputs: about s.
- The shrunk methods drop the unit with its bias. Layer l+1 loses those inputs, and FLOPs scale by
  kept outputs x live inputs: about s^2.
The two code paths below are this rule. A two-layer hand count is in tests/submodel/test_submodel.py. Per layer,
from fvcore's per-module counts:
- structured=False (mask-only, FedLPS): each masked layer's FLOPs scale by its kept fraction of output units
  (FedLPS §3: "output-unit masking scales FLOPs by about s, not s^2").
- structured=True (HeteroFL / FjORD / FedRolex / eFD / FedMP, which really shrink the network): a Conv/Linear
  layer's FLOPs also scale by the fraction of its INPUT units still alive. Those are found generically by a
  forward pass through a copy of the model whose pruned weight rows and biases are zeroed (kept weights made
  positive, random positive inputs, so no live feature is zero by chance through ReLU), with forward hooks
  recording which input channels (Conv: dim 1) / input features (Linear: last dim) are identically zero. In
  the probe a BatchNorm/GroupNorm passes its input through unchanged (its bias would revive a dead channel,
  and its normalization would push some live channels below zero, where ReLU kills them: GroupNorm did so
  in VGG-11-GN), and its fvcore per-element charge scales by its live channels. LayerNorm/InstanceNorm are
  neither passed through nor scaled (their bias may revive dead features, so later layers may be over-counted).
  This supports feed-forward conv/linear models (including residual ones); recurrent models raise
  NotImplementedError. fvcore's per-module count (a JIT trace) is cached per model and sample shape, since
  a submodel method asks for it per device per round.

`structure` says what a device of such a method holds of each parameter, from the same probe: the kept rows
of every Conv/Linear weight and bias (its unit mask; all rows for the classifier), the live columns (dim 1) of
every Conv/Linear weight, the live channels of every Batch-/GroupNorm. `entry_masks` turns it into 0/1
tensors of the parameters' shapes, to run the shrunk network inside the full one and to freeze the rest.
"""
from __future__ import annotations

import copy
import weakref
from fractions import Fraction
from typing import Mapping

import numpy as np
import torch
from torch import nn

from testbed.flops import flop_counts
from testbed.models.units import prunable_layers

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
    return entry_masks(params, {name: (mask, None) for name, mask in masks.items()})


def entry_masks(params: Mapping[str, torch.Tensor],
                structure: Mapping[str, tuple[torch.Tensor, torch.Tensor | None]]) -> dict[str, torch.Tensor]:
    """0/1 tensors of each listed parameter's shape and dtype: 1 where the row is kept and the column (dim 1, when
    given) is live, over all trailing dims. Multiplying the parameters by them runs the shrunk network inside the
    full one; as an update_mask they freeze the entries a device does not hold."""
    out = {}
    for name, (rows, columns) in structure.items():
        param = params[name]
        if rows.numel() != param.shape[0]:
            raise ValueError(f"{name}: mask of {rows.numel()} rows for a parameter of {param.shape[0]} rows")
        if columns is not None and columns.numel() != param.shape[1]:
            raise ValueError(f"{name}: mask of {columns.numel()} columns for a parameter of {param.shape[1]} columns")
        dtype = param.dtype if param.is_floating_point() else torch.float32
        keep = rows.to(device=param.device, dtype=dtype).reshape(-1, *([1] * (param.dim() - 1)))
        if columns is not None:
            keep = keep * columns.to(device=param.device, dtype=dtype).reshape(1, -1, *([1] * (param.dim() - 2)))
        out[name] = keep.expand_as(param).clone()
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


def _require_feed_forward(model: nn.Module) -> None:
    """The probe follows features through conv/linear layers; a recurrent state has no such rule."""
    if any(isinstance(m, nn.RNNBase) for m in model.modules()):
        raise NotImplementedError(
            "structured submodels support feed-forward conv/linear models only; "
            f"{type(model).__name__} has a recurrent layer (use structured=False, or count the shrunk model)")


_LAYERS = (nn.Linear, nn.modules.conv._ConvNd)


def _live_inputs(model: nn.Module, example: torch.Tensor, owners,
                 samples: int = 8) -> dict[str, torch.Tensor]:
    """Conv/Linear/Batch-/GroupNorm module name -> (input units,) bool on the CPU: which of its input units
    (Conv and norms: channels, dim 1; Linear: features, last dim) are alive in the zeroed copy of the model."""
    probe = copy.deepcopy(model).eval()
    probe_modules = dict(probe.named_modules())
    with torch.no_grad():
        for module in probe.modules():  # kept weights positive, so ReLU kills no live feature by chance
            if isinstance(module, _LAYERS):
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
    live: dict[str, torch.Tensor] = {}
    hooks = []

    def record(name, dim):
        def hook(module, inputs, output):
            x = inputs[0].detach()
            d = dim % x.dim()
            alive = (x.abs().transpose(0, d).reshape(x.shape[d], -1).sum(1) != 0).cpu()
            live[name] = live[name] | alive if name in live else alive  # a module called twice reads both inputs
        return hook

    def pass_through(module, inputs, output):  # a channel is live after the norm iff it is live before
        return inputs[0]

    for name, module in probe.named_modules():
        if isinstance(module, _CHANNEL_NORMS):
            hooks += [module.register_forward_hook(record(name, 1)), module.register_forward_hook(pass_through)]
        elif isinstance(module, nn.modules.conv._ConvNd):
            hooks.append(module.register_forward_hook(record(name, 1)))
        elif isinstance(module, nn.Linear):
            hooks.append(module.register_forward_hook(record(name, -1)))
    if example.is_floating_point():
        batch = torch.rand(samples, *example.shape[1:], dtype=example.dtype, device=example.device) + 0.1
    else:
        batch = example[:1].repeat(samples, *([1] * (example.dim() - 1)))
    try:
        with torch.no_grad():
            probe(batch)
    finally:
        for h in hooks:
            h.remove()
    return live


def structure(model: nn.Module, example: torch.Tensor,
              masks: Mapping[str, torch.Tensor]) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
    """What the shrunk network (unit `masks` applied structurally) holds of each parameter it slices:
    name -> (kept rows, (shape[0],) bool; live columns, (shape[1],) bool, or None where dim 1 is not sliced).

    Conv/Linear weight: rows = its unit mask (all True when unmasked, as the classifier's classes), columns = its
    live inputs (a Linear after a flatten: one per flattened feature); its bias: the same rows. Batch-/GroupNorm
    weight and bias: the live channels. Any other masked weight (an Embedding): its unit mask, columns None.
    Every such parameter is listed, all-True where nothing is dropped, so the keys depend on the architecture
    alone (per-device masks stack across ratios). Grouped and transposed convolutions are not supported.
    `example` is one input sample with its batch dimension.
    """
    _require_feed_forward(model)
    live = _live_inputs(model, example, _owners(model, masks))
    out: dict[str, tuple[torch.Tensor, torch.Tensor | None]] = {}
    for module_name, module in model.named_modules():
        prefix = module_name + "." if module_name else ""
        if isinstance(module, _LAYERS):
            if isinstance(module, nn.modules.conv._ConvNd) and (module.transposed or module.groups != 1):
                raise NotImplementedError(f"{module_name}: structured submodels need ungrouped, untransposed convs")
            out_units, in_units = module.weight.shape[:2]
            rows = masks.get(prefix + "weight", torch.ones(out_units)).bool()
            out[prefix + "weight"] = (rows, live.get(module_name, torch.ones(in_units, dtype=torch.bool)))
            if module.bias is not None:
                out[prefix + "bias"] = (rows, None)
        elif isinstance(module, _CHANNEL_NORMS) and module.weight is not None:
            channels = live.get(module_name, torch.ones(module.weight.shape[0], dtype=torch.bool))
            out[prefix + "weight"] = (channels, None)
            if module.bias is not None:
                out[prefix + "bias"] = (channels, None)
    for name, mask in masks.items():
        out.setdefault(name, (mask.bool(), None))
    return out


_flop_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _flop_counts(model: nn.Module, example: torch.Tensor) -> tuple[int, dict[str, int]]:
    """flop_counts, once per model and sample shape and dtype: its JIT trace is the slow part of submodel_flops,
    and the count depends on the architecture only (a model whose modules are replaced in place is not seen).
    Weakly keyed, so a model that is dropped drops its counts."""
    counts = _flop_cache.setdefault(model, {})
    key = (tuple(example.shape[1:]), example.dtype)
    if key not in counts:
        counts[key] = flop_counts(model, example)
    return counts[key]


def submodel_flops(model: nn.Module, example: torch.Tensor, masks: Mapping[str, torch.Tensor],
                   structured: bool) -> int:
    """Forward multiply-adds per sample of `model` with unit `masks` (weight name -> (n_units,) bool).

    structured=False: each masked module's fvcore count x its kept fraction of output units.
    structured=True: each Conv/Linear module's count x kept_out/out x live_in/in (the shrunk network), each
    Batch/GroupNorm's count x its live channel fraction; other counted ops (LayerNorm, ops outside modules)
    are kept at full cost. Feed-forward conv/linear models only.
    `example` is one input sample with its batch dimension.
    """
    if structured:
        _require_feed_forward(model)
    owners = _owners(model, masks)
    modules = dict(model.named_modules())
    total, by_module = _flop_counts(model, example)
    if not structured:
        flops = Fraction(total)
        for module_name, entries in owners.items():
            full = by_module.get(module_name, 0)
            flops -= full * (1 - _density(modules[module_name], entries))
        return int(round(flops))
    live = _live_inputs(model, example, owners)
    flops = Fraction(total)
    for name, module in modules.items():
        full = by_module.get(name, 0)
        if full == 0 or not isinstance(module, (*_LAYERS, *_CHANNEL_NORMS)):
            continue
        scale = _density(module, owners[name]) if name in owners else Fraction(1)
        if name in live:
            scale *= Fraction(int(live[name].sum()), live[name].numel())
        flops -= full * (1 - scale)
    return int(round(flops))


class SubmodelCosts:
    """A model's prunable units, and the structure and FLOPs of its submodels, for strategies that hold parameters
    but no model: built once per run from the global model and one input sample."""

    def __init__(self, model: nn.Module, example: torch.Tensor):
        self.model, self.example = model, example[:1]
        self.units = prunable_layers(model)
        self._flops: dict = {}
        self._structures: dict = {}

    def forward_flops(self, masks: Mapping[str, torch.Tensor], structured: bool) -> int:
        """Cached: by the kept counts when only the density matters, by the masks themselves otherwise."""
        key = (structured, _pattern_key(masks) if structured else tuple((n, int(m.sum())) for n, m in masks.items()))
        if key not in self._flops:
            self._flops[key] = submodel_flops(self.model, self.example, masks, structured)
        return self._flops[key]

    def structure(self, masks: Mapping[str, torch.Tensor]) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
        key = _pattern_key(masks)
        if key not in self._structures:
            self._structures[key] = structure(self.model, self.example, masks)
        return self._structures[key]


def _pattern_key(masks: Mapping[str, torch.Tensor]) -> tuple:
    return tuple((n, m.to(torch.bool).numpy().tobytes()) for n, m in masks.items())
