"""Max-pooling for the models: torch.max_pool2d's exact values, computed faster when evaluating on CPU.

Semantics: max_pool2d(x, k, s) returns exactly torch.max_pool2d(x, k, s) (a max is exact; NaN propagates as there).
Where no gradient is recorded (evaluation under torch.no_grad), on CPU:
- 2x2 windows with stride 2 (every model's pool but FedLion's): the elementwise maximum of the rows, then of the
  columns, on strided views; the rows and columns a floor-mode pool leaves out are left out here too;
- other windows, with at least CHANNELS_LAST_FROM elements: torch's kernel on a channels-last copy, made
  contiguous again.
Training (autograd), other devices and torch.func transforms (the batched executor's vmap) call torch.max_pool2d
itself, so its gradients, and every trained number, are torch's.

Why: torch's CPU kernel on a contiguous (NCHW) tensor computes an index per window and loops per channel. Measured on
2 cores, torch 2.13, cnn_512's first pool over 100 digits: 4.3 ms; 1.4 ms on a channels-last copy; 0.29 ms by
strided maxima (5-15x on the models' 2x2 pools). With autograd, strided maxima and a backward routing the gradient
as torch's kernel does (first maximum of each window) gave the same bits but were slower at training's batch sizes
(0.2-0.9x: a dozen small operations per backward), so training keeps torch's kernel.
"""
from __future__ import annotations

import torch
from torch import nn

CHANNELS_LAST_FROM = 100_000  # elements: below this the layout change costs more than it saves (measured)


def max_pool2d(x: torch.Tensor, kernel_size: int, stride: int | None = None) -> torch.Tensor:
    stride = kernel_size if stride is None else stride
    if (torch.is_grad_enabled() or x.dim() != 4 or x.device.type != "cpu"
            or torch._C._functorch.is_functorch_wrapped_tensor(x)):
        return torch.max_pool2d(x, kernel_size, stride)
    if kernel_size == stride == 2 and x.shape[-2] >= 2 and x.shape[-1] >= 2:
        height, width = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2
        kept = x[..., :height, :width]
        rows = torch.maximum(kept[..., 0::2, :], kept[..., 1::2, :])
        return torch.maximum(rows[..., 0::2], rows[..., 1::2])
    if x.numel() >= CHANNELS_LAST_FROM:
        return torch.max_pool2d(x.contiguous(memory_format=torch.channels_last), kernel_size, stride).contiguous()
    return torch.max_pool2d(x, kernel_size, stride)


class MaxPool2d(nn.Module):
    """nn.MaxPool2d(kernel_size) through max_pool2d above (no parameters, so state dicts are unchanged)."""

    def __init__(self, kernel_size: int):
        super().__init__()
        self.kernel_size = kernel_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return max_pool2d(x, self.kernel_size)
