"""The baselines' side of W1, written as plain PyTorch with nothing of the testbed in it but the seed rule:
the CNN as an ordinary nn.Module, and local training as the textbook torch.optim.SGD loop."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

TRAINING_STREAM = 2  # testbed.scenario.Purpose.TRAINING: the (device, round) shuffling stream is (seed, 2, r, d)


class PlainCNN(nn.Module):
    """conv(1->32,5)-pool-conv(32->64,5)-pool-fc(1024->512)-fc(512->10), ReLU after each pool and fc1;
    parameter names match the testbed's cnn_512 so its initial weights load as they are."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5)
        self.conv2 = nn.Conv2d(32, 64, 5)
        self.fc1 = nn.Linear(1024, 512)
        self.fc2 = nn.Linear(512, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def shuffling_rng(seed: int, round_: int, device: int) -> np.random.Generator:
    """The testbed's rule for the sample order: each epoch is a permutation drawn from the (device, round)
    stream's generator, one draw per epoch."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(TRAINING_STREAM, round_, device)))


def sgd_epochs(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float, batch_size: int, seed: int,
               round_: int, device: int, epochs: int = 1) -> None:
    """`epochs` passes of minibatch SGD over (x, y), in place."""
    rng = shuffling_rng(seed, round_, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        for batch in torch.from_numpy(rng.permutation(len(y))).split(batch_size):
            optimizer.zero_grad()
            F.cross_entropy(model(x[batch]), y[batch]).backward()
            optimizer.step()
