import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """These tests train models of a few thousand parameters on a few dozen samples: a second intra-op thread only
    adds contention (on a loaded 2-core machine it made runs 10x slower). Restored after each module."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
