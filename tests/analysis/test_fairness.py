"""Participation and its spread (analysis/fairness.py), by hand."""
from pathlib import Path

import pandas as pd
import pytest

from analysis.fairness import fairness, gini, participation
from analysis.runs import Run


def test_gini_by_hand():
    assert gini([1, 1, 1, 1]) == 0.0
    assert gini([0, 0, 0, 4]) == pytest.approx(3 / 4)  # one device did everything: (n - 1) / n
    # [0, 1, 3]: |differences| summed over ordered pairs 2 * (1 + 3 + 2) = 12; 2 n^2 mean = 2 * 9 * 4/3 = 24
    assert gini([0, 1, 3]) == pytest.approx(0.5)


def test_participation_counts_used_updates_and_the_devices_never_used(tmp_path: Path):
    pd.DataFrame({"device": [0, 1, 2, 3], "profile": ["a"] * 4}).to_csv(tmp_path / "devices.csv", index=False)
    events = pd.DataFrame({
        "device": [0, 0, 1, 1, 0, 2, -1],
        "round": [1, 1, 1, 1, 2, 2, 2],
        "phase": ["compute", "upload", "compute", "upload", "upload", "upload", "server"],
        "outcome": ["done", "done", "late", "late", "done", "surplus", "done"]})
    rounds = pd.DataFrame({"round": [1, 2], "local_accuracy_p10": [0.5, float("nan")]})
    run = Run(tmp_path, "x", 0, "fedavg", {}, rounds, events, {})
    assert participation(run).tolist() == [2, 0, 0, 0]
    assert fairness(run) == {"never_trained": 3, "gini": pytest.approx(0.75), "local_accuracy_p10": 0.5}
