"""A small 1-D convolutional network for windows of inertial signals (HAR: 6 channels x 128 samples).

The shape follows the 1-D convnets that HAR papers train on raw smartphone windows, e.g. Ronao and Cho, "Human
activity recognition with smartphone sensors using deep learning neural networks", Expert Systems with
Applications 59, 2016 (UCI HAR's 6 raw channels): convolutions along time with max pooling, then a fully connected
head. Ours is sized for phones and picked by us, not taken from a paper: three conv(kernel 5, 'same' padding) +
ReLU + maxpool(2) blocks of 32, 64 and 64 channels, FC(64 * T/8 -> 64) + ReLU, FC(64 -> classes).
At 6x128 and 6 classes: 97,830 parameters and 1,499,520 forward multiply-adds (conv 122,880 + 655,360 + 655,360,
FC 65,536 + 384). `width` multiplies the channels and the hidden units.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from testbed.models.cnn import _scaled

KERNEL = 5


class HARCNN(nn.Module):
    def __init__(self, sample_shape=(6, 128), num_classes=6, width: float = 1.0):
        super().__init__()
        in_ch, steps = sample_shape
        c1, c2, c3, hidden = (_scaled(n, width) for n in (32, 64, 64, 64))
        self.conv1 = nn.Conv1d(in_ch, c1, KERNEL, padding=KERNEL // 2)
        self.conv2 = nn.Conv1d(c1, c2, KERNEL, padding=KERNEL // 2)
        self.conv3 = nn.Conv1d(c2, c3, KERNEL, padding=KERNEL // 2)
        self.fc1 = nn.Linear(c3 * (steps // 8), hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in (self.conv1, self.conv2, self.conv3):
            x = F.max_pool1d(torch.relu(conv(x)), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))
