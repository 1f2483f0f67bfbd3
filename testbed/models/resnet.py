"""CIFAR-style residual networks with GroupNorm (no batch statistics to share or average across clients).

- ResNet-18 (FAdamGT CIFAR-10/100/Tiny, FedAdam-SSM SVHN, FedDUMAP CIFAR-100, FedLion's paper text): 3x3 stem
  with stride 1 and no max pool, BasicBlocks [2, 2, 2, 2] with 64/128/256/512 channels, 1x1 conv + norm
  projection shortcuts where the shape changes, global average pool, Linear(512 -> C). 11,173,962 parameters
  at C=10, the same count as with BatchNorm. The papers do not give the GroupNorm grouping; we use 2 groups,
  as Reddi et al. ("Adaptive Federated Optimization", ICLR 2021) do for their federated ResNet-18.
- ResNet-20 (FedLion's released code, "ResNet20 + GN"): 3x3 conv 16 + GN, 3 stages x 3 BasicBlocks with
  16/32/64 channels, GroupNorm with 4 channels per group, parameter-free "option A" shortcuts (stride-2
  subsampling plus zero channel padding), no conv biases, global average pool, Linear(64 -> C), Kaiming-normal
  init of conv and linear weights. 269,722 parameters at C=10 ("about 0.27M").
`width` multiplies every channel count; group counts shrink to the largest valid divisor.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from testbed.models.cnn import _scaled
from testbed.models.vgg import group_count


def _gn(channels: int, groups: int) -> nn.GroupNorm:
    return nn.GroupNorm(group_count(channels, groups), channels)


class _ProjectionBlock(nn.Module):
    """BasicBlock with a 1x1 conv + norm shortcut when the shape changes (ResNet-18)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, groups: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.norm1 = _gn(out_ch, groups)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.norm2 = _gn(out_ch, groups)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), _gn(out_ch, groups))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, sample_shape=(3, 32, 32), num_classes=10, width: float = 1.0, gn_groups: int = 2):
        super().__init__()
        in_ch = sample_shape[0]
        channels = [_scaled(c, width) for c in (64, 128, 256, 512)]
        self.conv1 = nn.Conv2d(in_ch, channels[0], 3, padding=1, bias=False)
        self.norm1 = _gn(channels[0], gn_groups)
        blocks: list[nn.Module] = []
        prev = channels[0]
        for stage, ch in enumerate(channels):
            for i in range(2):
                blocks.append(_ProjectionBlock(prev, ch, 2 if (stage > 0 and i == 0) else 1, gn_groups))
                prev = ch
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(prev, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.layers(torch.relu(self.norm1(self.conv1(x))))
        return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))


class _OptionABlock(nn.Module):
    """BasicBlock whose shortcut subsamples by 2 and zero-pads the new channels (ResNet-20, "option A")."""

    def __init__(self, in_ch: int, out_ch: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.norm1 = _gn(out_ch, max(1, out_ch // 4))
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.norm2 = _gn(out_ch, max(1, out_ch // 4))
        self.stride = stride
        self.pad = out_ch - in_ch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        shortcut = x
        if self.stride != 1 or self.pad:
            channels = (self.pad // 2, self.pad - self.pad // 2)  # zero channels on both sides (option A)
            shortcut = F.pad(x[:, :, :: self.stride, :: self.stride], (0, 0, 0, 0, *channels))
        return torch.relu(out + shortcut)


class ResNet20(nn.Module):
    def __init__(self, sample_shape=(3, 32, 32), num_classes=10, width: float = 1.0):
        super().__init__()
        in_ch = sample_shape[0]
        channels = [_scaled(c, width) for c in (16, 32, 64)]
        self.conv1 = nn.Conv2d(in_ch, channels[0], 3, padding=1, bias=False)
        self.norm1 = _gn(channels[0], max(1, channels[0] // 4))
        blocks: list[nn.Module] = []
        prev = channels[0]
        for stage, ch in enumerate(channels):
            for i in range(3):
                blocks.append(_OptionABlock(prev, ch, 2 if (stage > 0 and i == 0) else 1))
                prev = ch
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(prev, num_classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.layers(torch.relu(self.norm1(self.conv1(x))))
        return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))
