"""The baselines' side of W1, written as plain PyTorch with nothing of the testbed in it but the seed rule:
the CNN as an ordinary nn.Module, local training as the textbook torch.optim.SGD loop, and FedAvg's rounds."""
from __future__ import annotations

import time

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


def fedavg(initial: dict[str, torch.Tensor], train_x: torch.Tensor, train_y: torch.Tensor, clients: list[np.ndarray],
           selection: dict[int, list[int]], seed: int, lr: float, batch_size: int, test_x: torch.Tensor,
           test_y: torch.Tensor, epochs: int = 1, eval_batch: int | None = None) -> tuple[list[float], float]:
    """FedAvg's rounds: each selected client trains from the global weights, the global model is the
    sample-weighted mean, evaluated on (test_x, test_y) after each round (in batches of `eval_batch`, or all at
    once). Returns (accuracy after each round, seconds spent in local training)."""
    model = PlainCNN()
    state = {k: v.clone() for k, v in initial.items()}
    accuracies, train_s = [], 0.0
    for r in sorted(selection):
        total, summed = 0, {k: torch.zeros_like(v) for k, v in state.items()}
        for d in selection[r]:
            model.load_state_dict(state)
            index = torch.from_numpy(clients[d])
            began = time.perf_counter()
            sgd_epochs(model, train_x[index], train_y[index], lr, batch_size, seed, r, int(d), epochs)
            train_s += time.perf_counter() - began
            for k, v in model.state_dict().items():
                summed[k] += len(index) * v
            total += len(index)
        state = {k: v / total for k, v in summed.items()}
        model.load_state_dict(state)
        model.eval()
        with torch.no_grad():
            batches = zip(test_x.split(eval_batch or len(test_y)), test_y.split(eval_batch or len(test_y)))
            accuracies.append(sum(int((model(x).argmax(1) == y).sum()) for x, y in batches) / len(test_y))
    return accuracies, train_s
