"""Named random streams under one SeedSequence.

A stream is addressed by a key (purpose, group, device, round...), never by the order in which streams are
drawn, so that a query asked in any order, any number of times, sees the same numbers.
"""
import numpy as np


def child_seed(seed: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """The stream named `key` under `seed`: the same (seed, key) always gives the same numbers."""
    return np.random.SeedSequence(seed.entropy, spawn_key=tuple(seed.spawn_key) + tuple(key))


def device_rng(seed: np.random.SeedSequence, device_index: int) -> np.random.Generator:
    """One device's own generator, so that no device's draws depend on how many others there are."""
    return np.random.default_rng(child_seed(seed, device_index))
