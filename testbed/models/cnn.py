"""Small convolutional networks (28x28 digits, 32x32 CIFAR). `width` multiplies every hidden channel and unit
count; the input channels and the classifier's output (num_classes) never change."""
from __future__ import annotations

import torch
from torch import nn

from testbed.models.pool import max_pool2d


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
        x = torch.relu(max_pool2d(self.conv1(x), 2))
        x = torch.relu(max_pool2d(self.conv2(x), 2))
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


class FedDUMAPCNN(nn.Module):
    """FedDUMAP's CNN (specs/feddumap.md §7; paper §5: "122570 parameters"): conv3x3(3->32, valid) + ReLU +
    maxpool2, conv3x3(32->64) + ReLU + maxpool2, conv3x3(64->64) + ReLU, FC(1024->64) + ReLU, FC(64->C).
    At 3x32x32 and C=10: 122,570 parameters and 4,548,608 forward multiply-adds (the paper's 4.5 MFLOPs)."""

    def __init__(self, sample_shape=(3, 32, 32), num_classes=10, width: float = 1.0):
        super().__init__()
        in_ch, height, _ = sample_shape
        c1, c2, hidden = _scaled(32, width), _scaled(64, width), _scaled(64, width)
        side = ((height - 2) // 2 - 2) // 2 - 2
        self.conv1 = nn.Conv2d(in_ch, c1, 3)
        self.conv2 = nn.Conv2d(c1, c2, 3)
        self.conv3 = nn.Conv2d(c2, c2, 3)
        self.fc1 = nn.Linear(c2 * side * side, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = max_pool2d(torch.relu(self.conv1(x)), 2)
        x = max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.relu(self.conv3(x))
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


class LeNet5(nn.Module):
    """LeNet-5 as the FL papers use it: conv5x5(in->6) + ReLU + maxpool2, conv5x5(6->16) + ReLU + maxpool2,
    FC(16*s*s -> 120) + ReLU, FC(120->84) + ReLU, FC(84->C); no padding, so s = 5 at 32x32 (FedDUMAP's
    CIFAR LeNet5, FC 400->120->84->C: 651,720 forward multiply-adds, the paper's 0.7 MFLOPs) and s = 4 at 28x28."""

    def __init__(self, sample_shape=(3, 32, 32), num_classes=10, width: float = 1.0):
        super().__init__()
        in_ch, height, _ = sample_shape
        c1, c2 = _scaled(6, width), _scaled(16, width)
        h1, h2 = _scaled(120, width), _scaled(84, width)
        side = _after_two_conv5_pools(height)
        self.conv1 = nn.Conv2d(in_ch, c1, 5)
        self.conv2 = nn.Conv2d(c1, c2, 5)
        self.fc1 = nn.Linear(c2 * side * side, h1)
        self.fc2 = nn.Linear(h1, h2)
        self.fc3 = nn.Linear(h2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = max_pool2d(torch.relu(self.conv1(x)), 2)
        x = max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.relu(self.fc1(x.flatten(1)))
        return self.fc3(torch.relu(self.fc2(x)))


class FedAdamSSMCNN(LeNet5):
    """FedAdam-SSM's Fashion-MNIST CNN. The paper gives only the shape: "two 5x5 convolutional layers (each
    followed by ReLU activation and a 2x2 max pooling layer), two fully connected layers, and a final softmax
    output layer", no widths. specs/fedadam_ssm.md A3 fills them with LeNet-5's: conv(1->6), conv(6->16),
    FC 256->120, FC 120->84, output 84->10 (44,426 parameters; the softmax lives in the loss)."""

    def __init__(self, sample_shape=(1, 28, 28), num_classes=10, width: float = 1.0):
        super().__init__(sample_shape, num_classes, width)


class FedLionCNN(nn.Module):
    """FedLion's EMNIST "2-layer CNN" from the authors' code (specs/fedlion.md §4): conv8x8(1->16, stride 2,
    pad 3) + ReLU + maxpool(2, stride 1), conv4x4(16->32, stride 2) + ReLU + maxpool(2, stride 1),
    FC(512->32) + ReLU, FC(32->C). At 1x28x28 (EMNIST-digits, C=10): 28 -> 14 -> 13 -> 5 -> 4, so the flattened
    size is 32*4*4 = 512 and the parameters are 1,040 + 8,224 + 16,416 + 330 = 26,010."""

    def __init__(self, sample_shape=(1, 28, 28), num_classes=10, width: float = 1.0):
        super().__init__()
        in_ch, height, _ = sample_shape
        c1, c2, hidden = _scaled(16, width), _scaled(32, width), _scaled(32, width)
        side = (height + 2 * 3 - 8) // 2 + 1 - 1  # conv 8/2 pad 3, then pool 2/1
        side = (side - 4) // 2 + 1 - 1  # conv 4/2, then pool 2/1
        self.conv1 = nn.Conv2d(in_ch, c1, 8, stride=2, padding=3)
        self.conv2 = nn.Conv2d(c1, c2, 4, stride=2)
        self.fc1 = nn.Linear(c2 * side * side, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = max_pool2d(torch.relu(self.conv1(x)), 2, 1)
        x = max_pool2d(torch.relu(self.conv2(x)), 2, 1)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))
