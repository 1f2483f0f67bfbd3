"""Small convolutional networks for 28x28 digits. `width` multiplies every hidden channel and unit count."""
from __future__ import annotations

import torch
from torch import nn


def _scaled(units: int, width: float) -> int:
    return max(1, round(units * width))


def _after_two_conv5_pools(size: int) -> int:
    """Side length after conv5 (no padding) -> pool2 -> conv5 -> pool2."""
    return ((size - 4) // 2 - 4) // 2


class _TwoConvNet(nn.Module):
    """conv5 -> maxpool2 -> ReLU -> conv5 -> maxpool2 -> ReLU -> fc -> ReLU -> fc."""

    def __init__(self, sample_shape, num_classes, channels: tuple[int, int], hidden: int):
        super().__init__()
        in_ch, height, _ = sample_shape
        side = _after_two_conv5_pools(height)
        self.conv1 = nn.Conv2d(in_ch, channels[0], 5)
        self.conv2 = nn.Conv2d(channels[0], channels[1], 5)
        self.fc1 = nn.Linear(channels[1] * side * side, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(torch.max_pool2d(self.conv1(x), 2))
        x = torch.relu(torch.max_pool2d(self.conv2(x), 2))
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


class FedLPSCNN(_TwoConvNet):
    """FedLPS's MNIST CNN: Conv(1->10,5), Conv(10->20,5), FC(320->50), FC(50->10) (specs/fedlps.md §4).
    The paper ends in log-softmax + NLL; we return logits for cross-entropy, which is the same loss."""

    def __init__(self, sample_shape=(1, 28, 28), num_classes=10, width: float = 1.0):
        super().__init__(sample_shape, num_classes, (_scaled(10, width), _scaled(20, width)), _scaled(50, width))


class CNN512(_TwoConvNet):
    """conv(1->32,5)-pool-conv(32->64,5)-pool-fc(1024->512)-fc(512->10): McMahan et al.'s MNIST CNN
    without padding (the benchmark workload W1)."""

    def __init__(self, sample_shape=(1, 28, 28), num_classes=10, width: float = 1.0):
        super().__init__(sample_shape, num_classes, (_scaled(32, width), _scaled(64, width)), _scaled(512, width))
