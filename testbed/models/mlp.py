"""Fully connected models for small inputs: scikit-learn's 8x8 digits, LEAF's synthetic vectors.

MLP: McMahan et al.'s "2NN" (two hidden layers of 200 ReLU units) on any flattened input.
LogisticRegression: FedProx's model for synthetic(alpha, beta) (Li et al. 2020, §5.1), a single linear layer;
`width` has nothing to scale there and is ignored.
"""
from __future__ import annotations

import math

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, sample_shape, num_classes, width: float = 1.0, hidden: tuple[int, ...] = (200, 200)):
        super().__init__()
        sizes = [math.prod(sample_shape), *(max(1, round(h * width)) for h in hidden)]
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.classifier = nn.Linear(sizes[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for layer in self.hidden:
            x = torch.relu(layer(x))
        return self.classifier(x)


class LogisticRegression(nn.Module):
    def __init__(self, sample_shape, num_classes, width: float = 1.0):
        super().__init__()
        self.classifier = nn.Linear(math.prod(sample_shape), num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(x.flatten(1))
