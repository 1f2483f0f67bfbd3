"""Who got to train: each device's participation in a run, and how evenly it was spread.

- participation: per device of the fleet (devices.csv), the tasks whose update the server used (events.csv rows of
  phase "upload" with outcome "done"), 0 for a device never used;
- never_trained: how many devices have 0;
- gini: the Gini coefficient of participation over every device, sum_ij |x_i - x_j| / (2 n^2 mean): 0 when all
  trained alike, (n - 1) / n when one device did everything;
- worst-10% local accuracy: the run's last evaluated `local_accuracy_p10` (10th percentile over devices of each
  device's accuracy on its own test data), where devices have local test sets.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.runs import Run, devices_of


def participation(run: Run) -> pd.Series:
    """Updates used, per device (every device of devices.csv, else those in events.csv)."""
    events = run.events
    used = events[(events["phase"] == "upload") & (events["outcome"] == "done")].groupby("device").size()
    devices = devices_of(run)
    ids = devices["device"] if "device" in devices else events.loc[events["device"] >= 0, "device"].unique()
    return used.reindex(pd.Index(sorted(ids), name="device"), fill_value=0)


def gini(counts) -> float:
    x = np.asarray(counts, dtype=np.float64)
    if len(x) == 0 or x.sum() == 0:
        return math.nan
    return float(np.abs(x[:, None] - x[None, :]).sum() / (2 * len(x) ** 2 * x.mean()))


def fairness(run: Run) -> dict[str, float]:
    counts = participation(run)
    p10 = run.rounds["local_accuracy_p10"].dropna() if "local_accuracy_p10" in run.rounds else pd.Series([])
    return {"never_trained": int((counts == 0).sum()), "gini": gini(counts),
            "local_accuracy_p10": float(p10.iloc[-1]) if len(p10) else math.nan}
