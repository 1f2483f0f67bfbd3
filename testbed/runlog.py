"""The run folder: runs/<scenario>/<seed>/ with the resolved scenario, per-round and per-phase tables, the
devices, and a summary. Rows are appended and flushed every round, so a run that fails keeps what it did."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from analysis.metrics import summarize
from testbed.data.partition import label_histograms, non_iid_degree

ROUND_COLUMNS = ["round", "t_start_s", "t_end_s", "online", "selected", "arrived", "dropped", "late", "surplus",
                 "bytes_up", "bytes_down", "flops", "wasted_flops", "wasted_bytes", "train_loss", "accuracy",
                 "loss", "local_accuracy", "local_accuracy_p10"]
EVENT_COLUMNS = ["device", "round", "phase", "start_s", "end_s", "outcome", "ratio"]


def run_folder(out_root: str | Path, scenario) -> Path:
    return Path(out_root) / scenario.name / str(scenario.seed)


class RunWriter:
    def __init__(self, out_root: str | Path, exp):
        scenario = exp.scenario
        self.scenario = scenario
        self.path = run_folder(out_root, scenario)
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "scenario.resolved.yaml").write_text(
            yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False))
        self._write_devices(exp)
        self._rounds = self._open("rounds.csv", ROUND_COLUMNS)
        self._events = self._open("events.csv", EVENT_COLUMNS)

    def _open(self, name: str, columns: list[str]):
        handle = open(self.path / name, "w", newline="")
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        return handle, writer

    def _write_devices(self, exp) -> None:
        fleet = exp.fleet
        table = pd.DataFrame({"device": np.arange(fleet.n), "group": fleet.group, "profile": fleet.profile_name,
                              "peak_flops": fleet.peak_flops, "efficiency": fleet.efficiency,
                              "up_Bps": fleet.up_Bps, "down_Bps": fleet.down_Bps, "latency_s": fleet.latency_s,
                              "num_samples": exp.clients.num_samples,
                              "num_validation": [len(v) for v in exp.clients.validation],
                              "num_local_test": exp.clients.local_test_sizes()})
        histograms = label_histograms(exp.dataset.train_y.numpy(), exp.clients.train, exp.dataset.num_classes)
        per_device, self.non_iid_degree = non_iid_degree(histograms)
        table["js_divergence"] = per_device
        labels = pd.DataFrame(histograms, columns=[f"label_{c}" for c in range(exp.dataset.num_classes)])
        pd.concat([table, labels], axis=1).to_csv(self.path / "devices.csv", index=False)

    def round(self, record: dict, events: list[dict]) -> None:
        for (handle, writer), rows in ((self._rounds, [record]), (self._events, events)):
            writer.writerows(rows)
            handle.flush()

    def close(self, status: str = "completed") -> dict:
        for handle, _ in (self._rounds, self._events):
            handle.close()
        rounds = pd.read_csv(self.path / "rounds.csv")
        target = self.scenario.stop.target_accuracy
        summary = {"scenario": self.scenario.name, "seed": self.scenario.seed,
                   "algorithm": self.scenario.algorithm.name, "status": status,
                   "target_accuracy": target, "non_iid_degree": self.non_iid_degree,
                   **summarize(rounds, [target] if target else [])}
        (self.path / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary
