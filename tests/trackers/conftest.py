"""Fixtures of the tracker tests; their cases: tracker_cases.py."""
import pytest


@pytest.fixture
def clean_env(monkeypatch):
    """No tracker settings from the developer's environment."""
    for name in ("MLFLOW_TRACKING_URI", "WANDB_MODE", "WANDB_DIR", "WANDB_PROJECT", "WANDB_SILENT"):
        monkeypatch.delenv(name, raising=False)
