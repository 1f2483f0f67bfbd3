"""device_generators: the seeding hash of numpy's SeedSequence and PCG64's seeding, computed for many devices at
once, must give every device exactly device_rng's numbers."""
import numpy as np
import pytest

from devices.seeding import device_generators, device_rng

SEEDS = [np.random.SeedSequence(0, spawn_key=(0, 2)),        # a fleet's availability stream, group 2
         np.random.SeedSequence(2**100 + 12345, spawn_key=(5,)),  # run entropy of 4 words
         np.random.SeedSequence(2**130 + 1, spawn_key=(1,)),      # of 5 words: the spawn key mixes in after the pool
         np.random.SeedSequence(7),                               # no spawn key: padding starts with the device's
         np.random.SeedSequence(3, spawn_key=(2**40, 1)),         # a two-word key
         np.random.SeedSequence()]                                # fresh entropy


@pytest.mark.parametrize("seed", SEEDS, ids=range(len(SEEDS)))
def test_each_device_gets_device_rngs_numbers(seed):
    devices = [0, 1, 2, 17, 123_456, 2**32 - 1, 3]
    for d, rng in zip(devices, device_generators(seed, devices), strict=True):
        reference = device_rng(seed, d)
        assert rng.random() == reference.random()
        assert np.array_equal(rng.standard_exponential((4, 2)), reference.standard_exponential((4, 2)))
        assert rng.integers(10**9) == reference.integers(10**9)
        assert rng.integers(2**32, dtype=np.uint32) == reference.integers(2**32, dtype=np.uint32)  # a half word


def test_keys_it_cannot_hash_at_once_take_device_rng():
    seed = np.random.SeedSequence([1, 2, 3], spawn_key=(4,))  # list entropy; devices past 2**32 are two words
    devices = [5, 2**32, 2**40 + 7]
    for d, rng in zip(devices, device_generators(seed, devices), strict=True):
        assert rng.random() == device_rng(seed, d).random()
    assert list(device_generators(SEEDS[0], [])) == []
