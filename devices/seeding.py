"""Named random streams under one SeedSequence.

A stream is addressed by a key (purpose, group, device, round...), never by the order in which streams are
drawn, so that a query asked in any order, any number of times, sees the same numbers.
"""
from typing import Iterable, Iterator

import numpy as np


def child_seed(seed: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """The stream named `key` under `seed`: the same (seed, key) always gives the same numbers."""
    return np.random.SeedSequence(seed.entropy, spawn_key=tuple(seed.spawn_key) + tuple(key))


def device_rng(seed: np.random.SeedSequence, device_index: int) -> np.random.Generator:
    """One device's own generator, so that no device's draws depend on how many others there are."""
    return np.random.default_rng(child_seed(seed, device_index))


def device_generators(seed: np.random.SeedSequence, devices: Iterable[int]) -> Iterator[np.random.Generator]:
    """device_rng(seed, d) for each device in turn, as ONE generator moved to each device's stream (use it before
    asking for the next). Same numbers, ~5x cheaper: a SeedSequence and a PCG64 built per device cost ~20 us, most
    of a 100,000-device fleet's build; here the seeding hash runs on all devices at once (numpy) and each device
    costs a state assignment. tests/devices/test_device_generators.py checks it against device_rng."""
    devices = np.fromiter(devices, dtype=np.int64)
    if not _hashable_at_once(seed, devices):
        yield from (device_rng(seed, int(d)) for d in devices)
        return
    words = _pcg64_seeds(seed, devices)
    bit_generator = np.random.PCG64()
    generator = np.random.Generator(bit_generator)
    for initstate, initseq in zip(((words[:, 0] << 64) | words[:, 1]).tolist(),
                                  ((words[:, 2] << 64) | words[:, 3]).tolist()):
        # pcg64_set_seed: state 0, inc = 2 initseq + 1, one step, state += initstate, one step (mod 2**128)
        inc = ((initseq << 1) | 1) & _MASK128
        state = (((inc + initstate) & _MASK128) * _PCG_MULTIPLIER + inc) & _MASK128
        bit_generator.state = {"bit_generator": "PCG64", "state": {"state": state, "inc": inc},
                               "has_uint32": 0, "uinteger": 0}
        yield generator


# numpy's SeedSequence (numpy/random/bit_generator.pyx, after M. E. O'Neill's seed_seq) and PCG64 seeding constants
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R, _XSHIFT, _POOL_SIZE = 0xCA01F9DD, 0x4973F715, 16, 4
_PCG_MULTIPLIER = (2549297995355413924 << 64) | 4865540595714422341
_MASK128 = (1 << 128) - 1


def _words(value: int) -> list[int]:
    """A non-negative int as SeedSequence reads it: 32-bit words, lowest first; 0 is one word."""
    words = [value & 0xFFFFFFFF]
    while value := value >> 32:
        words.append(value & 0xFFFFFFFF)
    return words


def _hashable_at_once(seed: np.random.SeedSequence, devices: np.ndarray) -> bool:
    """Whether every device's key is one 32-bit word more than the seed's (all entropy arrays the same length)."""
    return (type(seed) is np.random.SeedSequence and seed.pool_size == _POOL_SIZE and isinstance(seed.entropy, int)
            and all(isinstance(k, int) and k >= 0 for k in seed.spawn_key)
            and (len(devices) == 0 or (devices.min() >= 0 and devices.max() < 2**32)))


def _pcg64_seeds(seed: np.random.SeedSequence, devices: np.ndarray) -> np.ndarray:
    """(n, 4) uint64: child_seed(seed, d).generate_state(4, np.uint64) for each device d, computed at once."""
    run = _words(seed.entropy)
    run += [0] * (_POOL_SIZE - len(run))  # a spawned sequence pads its run entropy to the pool size
    prefix = run + [w for key in seed.spawn_key for w in _words(key)]
    n = len(devices)
    entropy = [np.full(n, w, dtype=np.uint32) for w in prefix] + [devices.astype(np.uint32)]
    hash_const = np.uint32(_INIT_A)

    def hashmix(value):
        nonlocal hash_const
        value = value ^ hash_const
        hash_const = hash_const * np.uint32(_MULT_A)
        value = value * hash_const
        return value ^ (value >> np.uint32(_XSHIFT))

    def mix(x, y):
        result = np.uint32(_MIX_MULT_L) * x - np.uint32(_MIX_MULT_R) * y
        return result ^ (result >> np.uint32(_XSHIFT))

    with np.errstate(over="ignore"):
        pool = [hashmix(entropy[i]) for i in range(_POOL_SIZE)]
        for src in range(_POOL_SIZE):
            for dst in range(_POOL_SIZE):
                if src != dst:
                    pool[dst] = mix(pool[dst], hashmix(pool[src]))
        for src in range(_POOL_SIZE, len(entropy)):
            for dst in range(_POOL_SIZE):
                pool[dst] = mix(pool[dst], hashmix(entropy[src]))
        state, hash_const = [], np.uint32(_INIT_B)
        for i in range(8):  # generate_state(4, uint64): 8 words from the pool, cycled
            value = pool[i % _POOL_SIZE] ^ hash_const
            hash_const = hash_const * np.uint32(_MULT_B)
            value = value * hash_const
            state.append(value ^ (value >> np.uint32(_XSHIFT)))
    low, high = np.stack(state[0::2], axis=1).astype(np.uint64), np.stack(state[1::2], axis=1).astype(np.uint64)
    return (low | (high << np.uint64(32))).astype(object)  # python ints: the 128-bit arithmetic follows
