"""Synthetic(alpha, beta): the federated multinomial-logistic-regression data of FedProx (Li et al., "Federated
Optimization in Heterogeneous Networks", MLSys 2020, Sec. 5.1), also used by LEAF, generated in memory.

For client k (FedProx's data/synthetic_1_1/generate_synthetic.py, whose order of draws we follow):
- u_k ~ N(0, alpha), B_k ~ N(0, beta)  (the code draws them with standard deviation alpha, beta; the same for
  the usual alpha, beta in {0, 0.5, 1});
- W_k ~ N(u_k, 1) of shape (dim, num_classes), b_k ~ N(u_k, 1) of shape (num_classes,);
- v_k ~ N(B_k, 1) in R^dim; x ~ N(v_k, Sigma) with diagonal Sigma_jj = j^-1.2 (j = 1..dim);
- y = argmax(softmax(x W_k + b_k)), i.e. argmax(x W_k + b_k);
- n_k = int(lognormal(mean=4, sigma=2)) + 50 samples (FedProx's client sizes: heavy-tailed, at least 50).
alpha controls how much the local models differ, beta how much the local inputs differ; (0, 0) is the least
heterogeneous non-IID setting, (1, 1) the most. The defaults are FedProx's: 30 clients, dim 60, 10 classes.

Differences from FedProx's script: a seeded numpy Generator (the `seed` argument) instead of the global
numpy state, and each client's samples are shuffled and split 80/20 into train/test (FedProx used 90/10;
LEAF and the brief use 80/20). Every client has at least 40 train and 10 test samples. Clients are natural:
`train_clients` / `test_clients` give each sample's client index. With the defaults (seed 0) there are
30 clients and 5,385 samples: 4,298 train, 1,087 test.
"""
from __future__ import annotations

import numpy as np
import torch

from testbed.data.dataset import Dataset

LOGNORMAL_MEAN, LOGNORMAL_SIGMA, MIN_CLIENT_SAMPLES = 4.0, 2.0, 50
TRAIN_FRACTION = 0.8
COV_EXPONENT = -1.2


def generate_synthetic(alpha: float, beta: float, num_clients: int, dim: int, num_classes: int,
                       rng: np.random.Generator) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per-client inputs (n_k, dim) and labels (n_k,), FedProx's generator."""
    sizes = rng.lognormal(LOGNORMAL_MEAN, LOGNORMAL_SIGMA, num_clients).astype(np.int64) + MIN_CLIENT_SAMPLES
    mean_w = rng.normal(0.0, alpha, num_clients)
    mean_b = mean_w
    big_b = rng.normal(0.0, beta, num_clients)
    mean_x = np.stack([rng.normal(big_b[k], 1.0, dim) for k in range(num_clients)])
    std_x = np.sqrt(np.arange(1, dim + 1, dtype=np.float64) ** COV_EXPONENT)  # diagonal Sigma
    xs, ys = [], []
    for k in range(num_clients):
        w = rng.normal(mean_w[k], 1.0, (dim, num_classes))
        b = rng.normal(mean_b[k], 1.0, num_classes)
        x = mean_x[k] + std_x * rng.standard_normal((sizes[k], dim))
        xs.append(x)
        ys.append(np.argmax(x @ w + b, axis=1).astype(np.int64))  # softmax is monotone
    return xs, ys


def load_synthetic(alpha: float = 1.0, beta: float = 1.0, num_clients: int = 30, dim: int = 60,
                   num_classes: int = 10, seed: int = 0) -> Dataset:
    if num_clients < 1 or dim < 1 or num_classes < 2:
        raise ValueError("need num_clients >= 1, dim >= 1 and num_classes >= 2")
    if alpha < 0 or beta < 0:
        raise ValueError("alpha and beta are standard deviations; they must be >= 0")
    rng = np.random.default_rng(seed)
    xs, ys = generate_synthetic(alpha, beta, num_clients, dim, num_classes, rng)
    train, test = [], []
    for k, (x, y) in enumerate(zip(xs, ys)):
        order = rng.permutation(len(y))
        n_train = int(TRAIN_FRACTION * len(y))
        train.append((x[order[:n_train]], y[order[:n_train]], np.full(n_train, k, dtype=np.int64)))
        test.append((x[order[n_train:]], y[order[n_train:]], np.full(len(y) - n_train, k, dtype=np.int64)))

    def cat(parts: list, i: int, dtype) -> np.ndarray:
        return np.concatenate([p[i] for p in parts]).astype(dtype)

    name = f"synthetic_{alpha:g}_{beta:g}"
    return Dataset(name, torch.from_numpy(cat(train, 0, np.float32)), torch.from_numpy(cat(train, 1, np.int64)),
                   torch.from_numpy(cat(test, 0, np.float32)), torch.from_numpy(cat(test, 1, np.int64)),
                   num_classes=num_classes, train_clients=cat(train, 2, np.int64), test_clients=cat(test, 2, np.int64))
