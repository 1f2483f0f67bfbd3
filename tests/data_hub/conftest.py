import pytest


@pytest.fixture(autouse=True)
def offline_and_private_caches(tmp_path, monkeypatch):
    """No test reaches the network or another test's caches: the Hub offline, the testbed's and datasets' caches
    in the test's folder."""
    pytest.importorskip("datasets")
    pytest.importorskip("flwr_datasets")
    import datasets

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TESTBED_CACHE_DIR", str(tmp_path / "testbed_cache"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_datasets_cache")
