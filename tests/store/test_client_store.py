"""ClientStore: LRU order by hand, bit-identical spills, the mapping protocol, cleanup, and memory held."""
import gc
import weakref

import numpy as np
import pytest
import torch

from testbed.store import ClientStore


def state(seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"m": torch.randn(3, 4, generator=g), "v": torch.rand(5, generator=g, dtype=torch.float64),
            "mask": torch.rand(7, generator=g) > 0.5, "count": seed, "ucb": float(seed) / 3,
            "hist": np.arange(seed, seed + 4, dtype=np.int32)}


def same(a: dict, b: dict) -> bool:
    """Equal keys, types, dtypes, shapes and bytes."""
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if type(x) is not type(y):
            return False
        if isinstance(x, torch.Tensor):
            x, y = x.numpy(), y.numpy()
        if isinstance(x, np.ndarray):
            if not (x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()):
                return False
        elif x != y:
            return False
    return True


def test_lru_order_by_hand():
    with ClientStore(max_in_memory=2) as store:
        store[1] = state(1)
        store[2] = state(2)
        assert store.in_memory == [1, 2] and store.spilled == []
        store[3] = state(3)                     # 1 is the least recently used: spilled
        assert store.in_memory == [2, 3] and store.spilled == [1]
        store[2]                                # reading 2 makes it the most recent
        assert store.in_memory == [3, 2]
        store[4] = state(4)                     # now 3 is the oldest
        assert store.in_memory == [2, 4] and store.spilled == [1, 3]
        store[1]                                # 1 comes back, 2 goes out
        assert store.in_memory == [4, 1] and store.spilled == [2, 3]
        store[4] = state(40)                    # writing refreshes too
        assert store.in_memory == [1, 4]
        store[5] = state(5)
        assert store.in_memory == [4, 5] and store.spilled == [1, 2, 3]


def test_spilled_state_comes_back_bit_identical():
    originals = {d: state(d) for d in range(6)}
    with ClientStore(max_in_memory=1) as store:
        for d, s in originals.items():
            store[d] = {k: (v.clone() if isinstance(v, torch.Tensor) else v.copy() if isinstance(v, np.ndarray)
                            else v) for k, v in s.items()}
        assert len(store.spilled) == 5
        for d in range(6):
            assert same(store[d], originals[d])
        # and again, after a second round trip through the disk
        for d in reversed(range(6)):
            assert same(store[d], originals[d])


def test_special_floats_survive_bit_for_bit():
    x = torch.tensor([float("nan"), -0.0, float("inf"), 1e-45, -float("inf")])
    with ClientStore(max_in_memory=1) as store:
        store[0] = {"x": x.clone()}
        store[1] = {}
        assert store.spilled == [0]
        assert torch.equal(store[0]["x"].view(torch.int32), x.view(torch.int32))


def test_len_contains_iteration_and_delete():
    with ClientStore(max_in_memory=2) as store:
        assert len(store) == 0 and 0 not in store and list(store) == []
        for d in (7, 3, 9, 1):
            store[d] = state(d)
        assert len(store) == 4
        assert store.spilled == [3, 7]
        assert all(d in store for d in (1, 3, 7, 9)) and 2 not in store and "x" not in store
        assert np.int64(3) in store and store[np.int64(3)]["count"] == 3
        before = store.in_memory
        assert list(store) == [1, 3, 7, 9]       # iterating names ids; it neither loads nor reorders
        assert store.in_memory == before
        assert 3 in store                        # nor does a membership test
        assert store.in_memory == before
        assert dict(store.items())[9]["count"] == 9
        del store[7]                             # a spilled one
        del store[9]                             # one in memory
        assert sorted(store) == [1, 3] and len(store) == 2
        with pytest.raises(KeyError):
            store[7]
        with pytest.raises(KeyError):
            del store[42]
        assert store.get(42) is None
        assert store.get(1)["count"] == 1


def test_overwrite_a_spilled_device_replaces_its_file():
    with ClientStore(max_in_memory=1) as store:
        store[0] = state(0)
        store[1] = state(1)
        assert store.spilled == [0]
        store[0] = {"count": 99}
        assert store[0] == {"count": 99}
        assert len(store) == 2
        assert sorted(p.name for p in store.folder.iterdir()) == ["device_1.pt"]


def test_unlimited_never_spills():
    with ClientStore() as store:
        for d in range(50):
            store[d] = state(d)
        assert store.spilled == [] and len(store.in_memory) == 50 and store.folder is None


def test_close_removes_its_temporary_folder():
    store = ClientStore(max_in_memory=1)
    for d in range(3):
        store[d] = state(d)
    folder = store.folder
    assert folder.is_dir() and len(list(folder.iterdir())) == 2
    store.close()
    assert not folder.exists()
    store.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        store[0]


def test_temporary_folder_removed_when_the_store_is_dropped():
    store = ClientStore(max_in_memory=1)
    store[0], store[1] = state(0), state(1)
    folder = store.folder
    del store
    gc.collect()
    assert not folder.exists()


def test_given_folder_keeps_foreign_files(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("keep me")
    with ClientStore(max_in_memory=1, folder=tmp_path) as store:
        for d in range(3):
            store[d] = state(d)
        assert len(list(tmp_path.glob("device_*.pt"))) == 2
    assert list(tmp_path.iterdir()) == [other]
    new = tmp_path / "made"
    with ClientStore(max_in_memory=1, folder=new) as store:
        store[0], store[1] = state(0), state(1)
    assert not new.exists()


def test_spilled_devices_are_not_held_in_memory():
    store = ClientStore(max_in_memory=3)
    refs = {}
    for d in range(10):
        s = {"moment": torch.zeros(1000) + d}
        refs[d] = weakref.ref(s["moment"])
        store[d] = s
        del s
    gc.collect()
    alive = sorted(d for d, r in refs.items() if r() is not None)
    assert alive == [7, 8, 9] == store.in_memory
    assert len(store) == 10
    # loading one back evicts the oldest resident, and frees it
    assert store[0]["moment"][0].item() == 0.0
    gc.collect()
    assert refs[7]() is None and store.in_memory == [8, 9, 0]
    store.close()


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3"])
def test_rejects_a_bad_capacity(bad):
    with pytest.raises(ValueError, match="max_in_memory"):
        ClientStore(max_in_memory=bad)


def test_snapshot_reads_every_state_and_moves_none():
    with ClientStore(max_in_memory=2) as store:
        for d in (3, 1, 2):
            store[d] = state(d)
        memory, spilled = store.in_memory, store.spilled
        assert memory == [1, 2] and spilled == [3]
        snapshot = store.snapshot()
        assert list(snapshot) == [1, 2, 3] and all(same(snapshot[d], state(d)) for d in (1, 2, 3))
        assert store.in_memory == memory and store.spilled == spilled
    with pytest.raises(ValueError, match="closed"):
        store.snapshot()
