"""VGG-11/13/16 as FedLPS builds them for 32x32 and 64x64 inputs (specs/fedlps.md §4; the authors' Models.py).

Every conv is 3x3 with padding 1 (and a bias) followed by a normalization layer and ReLU; 'M' is a 2x2 max
pool; there is no dropout and no hidden FC layer: one Linear(512*s*s -> C), where s = side/32 (512 -> C at
32x32, 2048 -> C at 64x64). FedDUMAP's VGG11 is the same network (specs/feddumap.md §7: FC 512 -> C).

norm="bn": BatchNorm2d(track_running_stats=False), as FedLPS: no running statistics, so batch statistics are
used in eval too, and the model has no buffers (nothing to average, nothing to break torch.func). norm="gn":
GroupNorm with up to 32 groups (the largest divisor of the channel count not above 32).
"""
from __future__ import annotations

from functools import partial

import torch
from torch import nn

from testbed.models.cnn import _scaled
from testbed.models.pool import MaxPool2d

CONFIGS = {
    "vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg13": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
}


def group_count(channels: int, groups: int) -> int:
    """The largest divisor of `channels` that is at most `groups` (so any width multiplier gives a valid GroupNorm)."""
    g = max(1, min(groups, channels))
    while channels % g:
        g -= 1
    return g


def norm_layer(kind: str, channels: int, gn_groups: int = 32) -> nn.Module:
    if kind == "bn":
        return nn.BatchNorm2d(channels, track_running_stats=False)
    if kind == "gn":
        return nn.GroupNorm(group_count(channels, gn_groups), channels)
    raise ValueError(f"norm must be 'bn' or 'gn', not {kind!r}")


class VGG(nn.Module):
    def __init__(self, config: str, sample_shape=(3, 32, 32), num_classes=10, width: float = 1.0, norm: str = "bn"):
        super().__init__()
        in_ch, height, _ = sample_shape
        layers: list[nn.Module] = []
        side = height
        for item in CONFIGS[config]:
            if item == "M":
                layers.append(MaxPool2d(2))
                side //= 2
            else:
                out_ch = _scaled(item, width)
                layers += [nn.Conv2d(in_ch, out_ch, 3, padding=1), norm_layer(norm, out_ch), nn.ReLU()]
                in_ch = out_ch
        if side < 1:
            raise ValueError(f"{config} needs inputs of at least 32x32, got {tuple(sample_shape)}")
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(in_ch * side * side, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


class VGG11(VGG):
    """VGG-11 (FedLPS CIFAR-10, FedDUMAP CIFAR-10/100): 8 convs + Linear(512 -> C) at 32x32."""

    def __init__(self, sample_shape=(3, 32, 32), num_classes=10, width: float = 1.0, norm: str = "bn"):
        super().__init__("vgg11", sample_shape, num_classes, width, norm)


class VGG13(VGG):
    """VGG-13 (FedLPS CIFAR-100): 10 convs + Linear(512 -> C) at 32x32."""

    def __init__(self, sample_shape=(3, 32, 32), num_classes=100, width: float = 1.0, norm: str = "bn"):
        super().__init__("vgg13", sample_shape, num_classes, width, norm)


class VGG16(VGG):
    """VGG-16 (FedLPS Tiny-ImageNet): 13 convs + Linear(2048 -> C) at 64x64."""

    def __init__(self, sample_shape=(3, 64, 64), num_classes=200, width: float = 1.0, norm: str = "bn"):
        super().__init__("vgg16", sample_shape, num_classes, width, norm)


# the zoo's GroupNorm variants (testbed/names.py)
VGG11_GN, VGG13_GN, VGG16_GN = (partial(vgg, norm="gn") for vgg in (VGG11, VGG13, VGG16))
