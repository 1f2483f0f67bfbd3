"""Training memory footprint of a device's task, computed from the model (never configured).

footprint = parameters + gradients + optimizer state + activations (the input batch included) + backward + extra,
in bytes:
- parameters: sum of numel * element_size over the (sub)model's parameters (model.named_parameters(): a tied
  weight once); buffers (BatchNorm statistics) are not counted.
- gradients: the same again, one gradient per trained parameter.
- optimizer state: the bytes of `optimizer.init(params)`, which is exactly what a device's local optimizer keeps
  (SGD: 0; with momentum: 1x; Adam: 2x plus its 8-byte step counter; FedDA: 2x; Lion: 1x).
- activations: measured once per (model, batch size), batch size = `optimizer.batch_size`: one training forward
  pass (model in train mode, then cross-entropy against labels) on a random input of the sample's shape
  expanded to the batch (contiguous), recording with torch.autograd.graph.saved_tensors_hooks every tensor
  autograd saves for backward; each distinct storage counts once (by untyped_storage().data_ptr()), storages of
  parameters and buffers are not activations, and the input batch and the labels always count.
- backward: the largest single saved storage of a tensor that requires a gradient (not a parameter's), once: the
  peak of backward holds one activation's gradient (as big as that activation) beside the activations still saved.
- extra: per-client tensors a strategy sends besides the model (masks, control variates), `extra_bytes`, fixed.
Submodels (FedLPS, HeteroFL, FjORD, FedRolex, FedMP train a fraction `ratio` of each layer's units):
- parameters, gradients, optimizer state: exactly what the structured submodel holds (submodel.structure of
  the "ordered" unit_masks at `ratio`): kept rows x live columns x remaining dims for each sliced parameter,
  unsliced parameters whole; the optimizer state is `optimizer.init` of tensors of those shapes.
- activations: input batch + (full activations - input batch) * ratio, an approximation: each hidden layer keeps
  a fraction `ratio` of its units, so its saved outputs shrink by about `ratio` (a conv's saved input shrinks with
  the previous layer's units, the classifier's logits do not shrink at all); backward: the full model's * ratio.
- models that `structure` rejects (recurrent ones): parameters, gradients and optimizer state are the full
  model's times `ratio` (an approximation: an LSTM's gate matrices shrink by about ratio**2).
ratio = 1 gives exactly the full model's footprint. Not counted: backward's other transients (beside the largest
activation's gradient) and the optimizer step's temporaries, which depend on the implementation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from testbed.models.units import prunable_layers
from testbed.submodel import structure, unit_masks


@dataclass(frozen=True)
class Footprint:
    """Bytes a device needs to train; `activations` includes the input batch and its labels, `backward` is the
    gradient backward allocates for the largest saved activation while that activation is still held."""

    params: int
    grads: int
    optimizer: int
    activations: int
    backward: int = 0
    extra: int = 0

    @property
    def total(self) -> int:
        return self.params + self.grads + self.optimizer + self.activations + self.backward + self.extra


def _nbytes(tensors: Iterable[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _storage_bytes(tensors: Iterable[torch.Tensor]) -> dict[int, int]:
    """Storage address -> its bytes, each storage once."""
    return {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}


def _saved_activation_bytes(model: nn.Module, example: torch.Tensor, batch_size: int) -> tuple[int, int, int]:
    """(activations, input batch, backward) in bytes for one training forward pass at `batch_size`, as the module
    docstring defines them; the input batch is the inputs and the labels. Leaves the model's parameters, buffers,
    mode and torch's global RNG as they were."""
    params = dict(model.named_parameters())
    buffers = {n: b.clone() for n, b in model.named_buffers()}  # BatchNorm updates these clones, not the model
    owned = set(_storage_bytes([*params.values(), *buffers.values()]))
    saved: dict[int, int] = {}
    differentiable: dict[int, int] = {}  # the saved storages of tensors that backward computes a gradient for

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.update(_storage_bytes([t]))
        if t.requires_grad:
            differentiable.update(_storage_bytes([t]))
        return t

    was_training = model.training
    model.train()
    try:
        with torch.random.fork_rng(devices=[]), torch.enable_grad():  # dropout draws leave the global RNG alone
            sample = example[:1]
            if sample.is_floating_point():
                generator = torch.Generator(device=sample.device).manual_seed(0)
                sample = torch.rand(sample.shape, generator=generator, dtype=sample.dtype, device=sample.device)
            x = sample.expand(batch_size, *sample.shape[1:]).contiguous()  # integer tokens: the example's own
            y = torch.zeros(batch_size, dtype=torch.long, device=x.device)
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                loss = F.cross_entropy(functional_call(model, {**params, **buffers}, (x,)), y)
            del loss  # frees the graph and what it saved
    finally:
        model.train(was_training)
    batch = _storage_bytes([x, y])
    saved.update(batch)
    backward = max((n for ptr, n in differentiable.items() if ptr not in owned), default=0)
    return sum(n for ptr, n in saved.items() if ptr not in owned), sum(batch.values()), backward


def _meta(shapes: dict[str, tuple[tuple[int, ...], torch.dtype]]) -> dict[str, torch.Tensor]:
    """Tensors of these shapes without storage, for optimizer.init to size its state from."""
    return {n: torch.empty(shape, dtype=dtype, device="meta") for n, (shape, dtype) in shapes.items()}


class TrainingMemory:
    """Built once per run: the model, one example sample (with its batch dimension), and the local optimizer
    (testbed.local: its batch_size and init(params) define the activations and the optimizer state)."""

    def __init__(self, model: nn.Module, example: torch.Tensor, optimizer, extra_bytes: int = 0):
        self.model, self.example, self.optimizer = model, example[:1], optimizer
        self.extra_bytes = int(extra_bytes)
        self._activations: tuple[int, int, int] | None = None
        self._cache: dict[float, Footprint] = {}

    def footprint(self, ratio: float = 1.0) -> Footprint:
        """The footprint of training the submodel that keeps a fraction `ratio` of each layer's units (1: the
        whole model); cached per ratio."""
        if not 0 < ratio <= 1:
            raise ValueError(f"ratio must be in (0, 1], got {ratio}")
        if ratio not in self._cache:
            self._cache[ratio] = self._count(ratio)
        return self._cache[ratio]

    def largest_ratio_that_fits(self, memory_bytes: float, ratios: Iterable[float]) -> float | None:
        """The largest of the candidate `ratios` whose footprint fits in `memory_bytes`; None if none does."""
        for ratio in sorted(set(ratios), reverse=True):
            if self.footprint(ratio).total <= memory_bytes:
                return ratio
        return None

    def max_fitting_ratio(self, memory_bytes: float, resolution: int = 64) -> float | None:
        """The largest ratio k/resolution (k = 1..resolution) whose footprint fits in `memory_bytes`, None when
        not even 1/resolution fits. The footprint grows with the ratio (units kept, live inputs and the scaled
        activations all do), so a binary search over k finds it."""
        fits, misses = 0, resolution + 1  # k = fits is known to fit (0: nothing yet), k = misses not to
        while misses - fits > 1:
            k = (fits + misses) // 2
            if self.footprint(k / resolution).total <= memory_bytes:
                fits = k
            else:
                misses = k
        return fits / resolution if fits else None

    def _count(self, ratio: float) -> Footprint:
        if self._activations is None:
            self._activations = _saved_activation_bytes(self.model, self.example, self.optimizer.batch_size)
        activations, batch, backward = self._activations
        params = dict(self.model.named_parameters())
        shapes = {n: (tuple(p.shape), p.dtype) for n, p in params.items()}
        scale = 1.0  # of the parameters, gradients and optimizer state: ratio for models structure rejects
        if ratio < 1:
            try:
                with torch.random.fork_rng(devices=[]):  # structure's probe draws its inputs from the global RNG
                    kept = structure(self.model, self.example,
                                     unit_masks(params, prunable_layers(self.model), ratio, "ordered"))
            except NotImplementedError:
                scale = ratio
            else:
                for name, (rows, columns) in kept.items():
                    shape, dtype = shapes[name]
                    dims = [int(rows.sum()), *shape[1:]]
                    if columns is not None:
                        dims[1] = int(columns.sum())
                    shapes[name] = (tuple(dims), dtype)
            activations = batch + round((activations - batch) * ratio)
            backward = round(backward * ratio)
        held = _meta(shapes)
        param_bytes = round(_nbytes(held.values()) * scale)
        optimizer_bytes = round(_nbytes(self.optimizer.init(held).values()) * scale)
        return Footprint(param_bytes, param_bytes, optimizer_bytes, activations, backward, self.extra_bytes)


__all__ = ["Footprint", "TrainingMemory"]
