"""Max-pooling for the models: torch.max_pool2d's exact values, computed faster when evaluating on CPU.

Semantics: max_pool2d(x, k, s) returns exactly torch.max_pool2d(x, k, s). Where no gradient is recorded (evaluation
under torch.no_grad) and x has at least CHANNELS_LAST_FROM elements, the pool runs on a channels-last copy of x
and its result is made contiguous again. A max is exact, so the values are the same floats either way.

Why: torch's CPU kernel for a contiguous (NCHW) tensor is much slower than its channels-last kernel on large inputs
(measured on 2 cores, torch 2.13, without autograd: cnn_512's first pool over 100 digits 4.9 ms vs 1.4 ms, 2.4-5.4x
on the models' pools at evaluation batches of 100; evaluating 1,000 digits with cnn_512 took 177 ms, of which
the first pool alone 49 ms). Training is left on the plain kernel: with autograd the gain is mixed (1.4x on
cnn_512's first pool at batch 10, 0.7x on VGG's first), and leaving it keeps every trained number as it was.
Under torch.func transforms (the batched executor's vmap) a layout change is not supported: the plain call runs.
"""
from __future__ import annotations

import torch
from torch import nn

CHANNELS_LAST_FROM = 100_000  # elements: below this the layout change costs more than it saves (measured)


def max_pool2d(x: torch.Tensor, kernel_size: int, stride: int | None = None) -> torch.Tensor:
    stride = kernel_size if stride is None else stride
    if (x.numel() >= CHANNELS_LAST_FROM and x.dim() == 4 and not torch.is_grad_enabled() and x.device.type == "cpu"
            and not torch._C._functorch.is_functorch_wrapped_tensor(x)):
        pooled = torch.max_pool2d(x.contiguous(memory_format=torch.channels_last), kernel_size, stride)
        return pooled.contiguous()
    return torch.max_pool2d(x, kernel_size, stride)


class MaxPool2d(nn.Module):
    """nn.MaxPool2d(kernel_size) through max_pool2d above (no parameters, so state dicts are unchanged)."""

    def __init__(self, kernel_size: int):
        super().__init__()
        self.kernel_size = kernel_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return max_pool2d(x, self.kernel_size)
