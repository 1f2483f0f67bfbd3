"""Split a training set's indices among clients: IID, Dirichlet over labels, or label shards.

Each partitioner takes the labels, the number of clients and a numpy Generator, and returns one index array
per client. Every client gets at least `min_samples` samples: a device with no data would train for zero
seconds, which the engine refuses.
"""
from __future__ import annotations

import numpy as np

MAX_DIRICHLET_DRAWS = 1000


def iid(labels: np.ndarray, n_clients: int, rng: np.random.Generator, min_samples: int = 1) -> list[np.ndarray]:
    _check_enough(len(labels), n_clients, min_samples)
    return [np.sort(part) for part in np.array_split(rng.permutation(len(labels)), n_clients)]


def dirichlet(labels: np.ndarray, n_clients: int, rng: np.random.Generator, alpha: float,
              min_samples: int = 1) -> list[np.ndarray]:
    """Per class, shares ~ Dirichlet(alpha) over clients (Hsu et al. 2019); redrawn until every client has
    `min_samples`, as the usual implementations do."""
    _check_enough(len(labels), n_clients, min_samples)
    for _ in range(MAX_DIRICHLET_DRAWS):
        parts: list[list[int]] = [[] for _ in range(n_clients)]
        for cls in np.unique(labels):
            members = rng.permutation(np.flatnonzero(labels == cls))
            cuts = (np.cumsum(rng.dirichlet(np.full(n_clients, alpha)))[:-1] * len(members)).astype(int)
            for client, chunk in enumerate(np.split(members, cuts)):
                parts[client].extend(chunk.tolist())
        if min(len(p) for p in parts) >= min_samples:
            return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
    raise ValueError(f"Dirichlet(alpha={alpha}) left a client with fewer than {min_samples} samples in "
                     f"{MAX_DIRICHLET_DRAWS} draws; raise alpha, lower min_samples_per_client or use fewer devices")


def shards(labels: np.ndarray, n_clients: int, rng: np.random.Generator, classes_per_client: int,
           min_samples: int = 1) -> list[np.ndarray]:
    """Pathological non-IID split (McMahan et al.; DisPFL and FedLPS): sort by label, cut into
    n_clients * classes_per_client shards, deal each client `classes_per_client` random shards."""
    n_shards = n_clients * classes_per_client
    _check_enough(len(labels), n_shards, min_samples)
    by_label = np.argsort(labels, kind="stable")
    pieces = np.array_split(by_label, n_shards)
    order = rng.permutation(n_shards)
    return [np.sort(np.concatenate([pieces[s] for s in order[c::n_clients]])) for c in range(n_clients)]


def _check_enough(n_samples: int, n_parts: int, min_samples: int) -> None:
    if n_samples < n_parts * min_samples:
        raise ValueError(f"{n_samples} training samples cannot give {n_parts} parts {min_samples} samples each; "
                         "use fewer devices")


PARTITIONERS = {"iid": iid, "dirichlet": dirichlet, "shards": shards}


def label_histograms(labels: np.ndarray, parts: list[np.ndarray], num_classes: int) -> np.ndarray:
    """(clients, classes) sample counts."""
    return np.stack([np.bincount(labels[p], minlength=num_classes) for p in parts])
