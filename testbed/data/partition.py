"""Split a training set's indices among clients: IID, Dirichlet over labels, label shards, the dataset's
natural clients (Flower Datasets' partitioners, the `flwr` kind: flower_partition.py; the registry of every kind,
PARTITIONERS: testbed/data/__init__.py); split each client's data into train / validation / test; measure how
non-IID a split is.

Each partitioner takes the labels, the number of clients and a numpy Generator, and returns one index array
per client. Every client gets at least `min_samples` samples: a device with no data would train for zero
seconds, which the engine refuses.
"""
from __future__ import annotations

import math

import numpy as np

MAX_DIRICHLET_DRAWS = 1000


def iid(labels: np.ndarray, n_clients: int, rng: np.random.Generator, min_samples: int = 1) -> list[np.ndarray]:
    check_enough(len(labels), n_clients, min_samples)
    return [np.sort(part) for part in np.array_split(rng.permutation(len(labels)), n_clients)]


def dirichlet(labels: np.ndarray, n_clients: int, rng: np.random.Generator, alpha: float,
              min_samples: int = 1) -> list[np.ndarray]:
    """Per class, shares ~ Dirichlet(alpha) over clients (Hsu et al. 2019); redrawn until every client has
    `min_samples`, as the usual implementations do."""
    check_enough(len(labels), n_clients, min_samples)
    for _ in range(MAX_DIRICHLET_DRAWS):
        parts: list[list[int]] = [[] for _ in range(n_clients)]
        for cls in np.unique(labels):
            members = rng.permutation(np.flatnonzero(labels == cls))
            cuts = (np.cumsum(rng.dirichlet(np.full(n_clients, alpha)))[:-1] * len(members)).astype(int)
            for client, chunk in enumerate(np.split(members, cuts)):
                parts[client].extend(chunk.tolist())
        if min(len(p) for p in parts) >= min_samples:
            return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
    raise ValueError(f"a Dirichlet split with alpha {alpha} over {n_clients} devices ({len(labels)} training "
                     f"samples) could not give every device at least data.min_samples_per_client={min_samples} "
                     f"samples in {MAX_DIRICHLET_DRAWS} draws; raise data.partition.alpha, lower "
                     "data.min_samples_per_client, or use fewer devices")


def shards(labels: np.ndarray, n_clients: int, rng: np.random.Generator, classes_per_client: int,
           min_samples: int = 1) -> list[np.ndarray]:
    """Pathological non-IID split (McMahan et al.; DisPFL and FedLPS): sort by label, cut into
    n_clients * classes_per_client shards, deal each client `classes_per_client` random shards."""
    n_shards = n_clients * classes_per_client
    check_enough(len(labels), n_shards, min_samples, f"{n_shards} shards ({n_clients} devices x "
                 f"data.partition.classes_per_client={classes_per_client})",
                 "use fewer devices, lower data.partition.classes_per_client,")
    by_label = np.argsort(labels, kind="stable")
    pieces = np.array_split(by_label, n_shards)
    order = rng.permutation(n_shards)
    return [np.sort(np.concatenate([pieces[s] for s in order[c::n_clients]])) for c in range(n_clients)]


def check_enough(n_samples: int, n_parts: int, min_samples: int, parts: str = "", fix: str = "") -> None:
    """Refuses, before any draw, a split no draw can make: fewer samples than the parts need together. `parts`
    says what the parts are where they are not devices (shards), `fix` what to change then."""
    if n_samples < n_parts * min_samples:
        raise ValueError(f"{n_samples} training samples cannot give {parts or f'{n_parts} devices'} "
                         f"data.min_samples_per_client={min_samples} samples each; "
                         f"{fix or f'use at most {n_samples // min_samples} devices'} or lower "
                         "data.min_samples_per_client")


def natural(labels: np.ndarray, n_clients: int, rng: np.random.Generator, clients: np.ndarray,
            min_samples: int = 1) -> list[np.ndarray]:
    """The dataset's own clients (writers, speaking roles, users): `clients[i]` is training sample i's client.

    With fewer devices than natural clients, `n_clients` of them are drawn with `rng` (without replacement)
    and taken in ascending id order; only clients with at least `min_samples` samples are eligible.
    """
    clients = np.asarray(clients)
    if clients.shape != (len(labels),):
        raise ValueError(f"natural partition: {len(clients)} client ids for {len(labels)} training samples")
    ids, counts = np.unique(clients, return_counts=True)
    chosen = draw_clients(ids, counts, n_clients, rng, min_samples, "the dataset has only {} natural clients{}")
    order = np.argsort(clients, kind="stable")  # indices grouped by client, ascending within each client
    starts = np.searchsorted(clients[order], chosen, side="left")
    ends = np.searchsorted(clients[order], chosen, side="right")
    return [order[a:b].astype(np.int64) for a, b in zip(starts, ends)]


def draw_clients(ids: np.ndarray, counts: np.ndarray, n_clients: int, rng: np.random.Generator, min_samples: int,
                 too_few: str) -> np.ndarray:
    """The ids (ascending, with their sample `counts`) that become the devices: all of them where there are as many
    as devices, else `n_clients` drawn with `rng` without replacement among those with at least `min_samples`
    samples, in ascending order. `too_few` words the refusal of too many devices: it is formatted with the number
    of eligible ids and a qualifier. The `natural` partition and Flower's partitioners (flower_partition.py) share
    it, so Flower's NaturalIdPartitioner gives the devices our `natural` partition gives."""
    eligible = ids[counts >= min_samples]
    if n_clients > len(eligible):
        which = "" if len(eligible) == len(ids) else f" with at least {min_samples} training samples"
        raise ValueError(f"{too_few.format(len(eligible), which)}; use at most {len(eligible)} devices")
    if n_clients < 1:
        raise ValueError("the natural partition needs at least one device")
    return eligible if n_clients == len(eligible) else np.sort(rng.choice(eligible, n_clients, replace=False))


def split_clients(parts: list[np.ndarray], rng: np.random.Generator, val_fraction: float,
                  test_fraction: float) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Per-client train / validation / test index arrays, for personalized evaluation (not stratified).

    Each client's indices are shuffled with `rng`; ceil(test_fraction * n) become its test set and
    ceil(val_fraction * n) its validation set, the rest its training set (rounding up, as LEAF does, so a
    client with a few samples still gets a test sample). Every client keeps at least one training sample:
    where the held-out sets would leave none, the validation set shrinks first, then the test set, so a
    client of one sample has only a training set. Arrays come back sorted.
    """
    if not (0 <= val_fraction < 1 and 0 <= test_fraction < 1 and val_fraction + test_fraction < 1):
        raise ValueError(f"val_fraction={val_fraction} and test_fraction={test_fraction} must be >= 0 "
                         "and sum to less than 1")
    if any(len(part) < 1 for part in parts):
        raise ValueError("a client with no samples cannot keep a training sample")
    if val_fraction == 0 and test_fraction == 0:   # nothing held out: each part sorted, no shuffle needed
        return _sorted_parts(parts), [_NONE] * len(parts), [_NONE] * len(parts)
    train, val, test = [], [], []
    for part in parts:
        part = np.asarray(part, dtype=np.int64)
        n = len(part)
        n_test, n_val = (math.ceil(round(fraction * n, 9)) for fraction in (test_fraction, val_fraction))
        excess = n_test + n_val - (n - 1)
        if excess > 0:
            cut = min(excess, n_val)
            n_val, n_test = n_val - cut, n_test - (excess - cut)
        shuffled = rng.permutation(part)
        test.append(np.sort(shuffled[:n_test]))
        val.append(np.sort(shuffled[n_test:n_test + n_val]))
        train.append(np.sort(shuffled[n_test + n_val:]))
    return train, val, test


_NONE = np.empty(0, dtype=np.int64)
_NONE.setflags(write=False)


def _sorted_parts(parts: list[np.ndarray]) -> list[np.ndarray]:
    """[np.sort(part) for part in parts], in one sort of all of them (a fleet of 10^5 clients)."""
    if not parts:
        return []
    lengths = np.array([len(part) for part in parts])
    flat = np.concatenate(parts).astype(np.int64, copy=False)
    owner = np.repeat(np.arange(len(parts)), lengths)
    return np.split(flat[np.lexsort((flat, owner))], np.cumsum(lengths)[:-1])


def label_histograms(labels: np.ndarray, parts: list[np.ndarray], num_classes: int) -> np.ndarray:
    """(clients, classes) sample counts."""
    return np.stack([np.bincount(labels[p], minlength=num_classes) for p in parts])


def _distributions(counts: np.ndarray) -> np.ndarray:
    counts = np.asarray(counts, dtype=np.float64)
    if (counts < 0).any() or not np.isfinite(counts).all():
        raise ValueError("label counts or probabilities must be finite and non-negative")
    totals = counts.sum(axis=-1, keepdims=True)
    if (totals <= 0).any():
        raise ValueError("a distribution has no mass (a client with no samples?)")
    return counts / totals


def _kl2(p: np.ndarray, m: np.ndarray) -> np.ndarray:
    """KL(p || m) in bits along the last axis, with 0 log 0 = 0 (m > 0 wherever p > 0)."""
    ratio = np.where(p > 0, p / np.where(m > 0, m, 1.0), 1.0)
    return (p * np.log2(ratio)).sum(axis=-1)


def js_divergence(p: np.ndarray, q: np.ndarray) -> float | np.ndarray:
    """Jensen-Shannon divergence in bits (0 for identical, 1 for disjoint distributions):
    JS(P, Q) = KL(P || M) / 2 + KL(Q || M) / 2 with M = (P + Q) / 2 (FedDUMAP's Eq. 2-3, log base 2).

    p and q are label counts or probabilities (normalised here); p may be (clients, classes), broadcast
    against q. Equals scipy.spatial.distance.jensenshannon(p, q, base=2) ** 2.
    """
    p, q = _distributions(p), _distributions(q)
    if p.shape[-1] != q.shape[-1]:
        raise ValueError(f"distributions over {p.shape[-1]} and {q.shape[-1]} classes")
    m = (p + q) / 2
    js = np.clip((_kl2(p, m) + _kl2(q, m)) / 2, 0.0, 1.0)
    return float(js) if js.ndim == 0 else js


def non_iid_degree(histograms: np.ndarray) -> tuple[np.ndarray, float]:
    """FedDUMAP's non-IID degree of a partition: each client's JS divergence (bits) between its label
    distribution P_k and the distribution over all clients' data, P = sum_k n_k P_k / sum_k n_k (the pooled
    label counts); and the plain mean over clients.

    `histograms` is (clients, classes) counts, e.g. from `label_histograms`.
    """
    histograms = np.asarray(histograms, dtype=np.float64)
    if histograms.ndim != 2 or len(histograms) == 0:
        raise ValueError("histograms must be (clients, classes) label counts")
    per_client = np.atleast_1d(js_divergence(histograms, histograms.sum(axis=0)))
    return per_client, float(per_client.mean())
