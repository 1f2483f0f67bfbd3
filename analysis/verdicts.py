"""What compare's groups say against their baseline, with its uncertainty: every metric's mean over a group's seeds
with a 95% interval, the difference from the baseline's mean with its interval and the verdict it gives, and
whether the verdicts hold on a second set of the same runs (computed in another float summation order, e.g.
executor.threads=2, as another CPU would). The statistics are analysis.intervals'.

interval_table, one row per group and metric (intervals.csv):
  group, metric; seeds (n: the group's seeds that gave a value: a target's cost counts the seeds that reached it);
  mean, ci95_low, ci95_high (Student's t; NaN where n < 2); baseline (the group it is set against), baseline_seeds;
  vs_baseline, vs_ci95_low, vs_ci95_high: the group's mean minus the baseline's (Welch's interval); verdict
  ("higher", "lower", "within noise", "n=1"; BASELINE on the baseline's own rows, NO_BASELINE where a group has
  none). speedup@t rows: mean = the baseline's mean time to t over the group's (compare.csv's speedup@t),
  ci95_low/ci95_high its percentile bootstrap, the verdict that interval against 1, vs_* empty.
agreement_table, one row per group and HEADLINE metric that has a verdict (sensitivity.csv): both sets' effect
  (the difference, or the speedup) and verdict, whether the effect has the same sign in both, and holds: "yes"
  where the verdicts are the same, "no" where not, "n=1" where either set has no interval, "missing" where the
  other set has no such group or none of its baseline.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.intervals import (NO_INTERVAL, RESAMPLES, difference_interval, interval_text, mean_interval,
                                ratio_interval, verdict)
from analysis.report import REACHED_ON, _decimals

SPEEDUP = "speedup@"
BASELINE, NO_BASELINE = "baseline", "-"
# The metrics a study's verdicts are about: printed, shown in the report and checked by --against; intervals.csv
# holds every metric.
HEADLINE = (REACHED_ON, SPEEDUP, "final_accuracy", "final_local_accuracy")
COLUMNS = ["group", "metric", "seeds", "mean", "ci95_low", "ci95_high", "baseline", "baseline_seeds", "vs_baseline",
           "vs_ci95_low", "vs_ci95_high", "verdict"]
INTERVALS_NOTE = (f"95% intervals over each group's seeds: mean [Student's t]; vs baseline: the group's mean minus "
                  f"the baseline's [Welch's t], 'higher' or 'lower' where that interval excludes 0, 'within noise' "
                  f"where it holds 0; speedup@target [percentile bootstrap over seeds, {RESAMPLES} resamples, "
                  f"seeded], its verdict against 1; n: seeds with a value ({NO_INTERVAL}: one seed, no interval); "
                  f"every metric in intervals.csv")
AGREEMENT_NOTE = ("verdicts against the baseline in these runs and in --against's (the same groups, another "
                  "summation order: another executor.threads or CPU); holds: the same verdict in both")


def interval_table(per_run: pd.DataFrame, metrics: list[str], against: dict[str, object] | None) -> pd.DataFrame:
    """The rows of the module docstring: per_run is compare's table of runs (a `group` column, the `metrics`),
    against maps each group to the label of its baseline group (NaN or None: it has none; against None: no
    baseline was asked for, so no verdicts and no speedups)."""
    values = {label: seeds for label, seeds in per_run.groupby("group", sort=False)}
    rows = []
    for label, seeds in values.items():
        base = (against or {}).get(label)
        # NaN: no group to set it against; absent here: a second set (--against) lacks the baseline's runs
        base = None if base is None or (isinstance(base, float) and math.isnan(base)) or base not in values else base
        for metric in metrics:
            rows.append(_row(label, metric, seeds[metric], base, values[base][metric] if base else None, against))
        for metric in [m for m in metrics if m.startswith(REACHED_ON)] if against is not None else []:
            rows.append(_speedup_row(label, metric, seeds[metric], base, values[base][metric] if base else None))
    return pd.DataFrame(rows, columns=COLUMNS)


def _row(label, metric, seeds: pd.Series, base, base_seeds, against) -> dict:
    n, mean, low, high = mean_interval(seeds)
    row = {"group": label, "metric": metric, "seeds": n, "mean": mean, "ci95_low": low, "ci95_high": high,
           "baseline": base, "baseline_seeds": None, "vs_baseline": math.nan, "vs_ci95_low": math.nan,
           "vs_ci95_high": math.nan, "verdict": NO_BASELINE if against is not None else None}
    if base == label:
        return row | {"baseline_seeds": n, "verdict": BASELINE}
    if base is not None:
        d, d_low, d_high = difference_interval(seeds, base_seeds)
        row |= {"baseline_seeds": int(base_seeds.notna().sum()), "vs_baseline": d, "vs_ci95_low": d_low,
                "vs_ci95_high": d_high, "verdict": verdict(d_low, d_high) if not math.isnan(d) else NO_BASELINE}
    return row


def _speedup_row(label, time_column, seeds: pd.Series, base, base_seeds) -> dict:
    """speedup@t = the baseline's mean time over the group's: the ratio of their means, bootstrapped."""
    ratio, low, high = ratio_interval(base_seeds, seeds) if base is not None else (math.nan,) * 3
    row = {"group": label, "metric": SPEEDUP + time_column.removeprefix(REACHED_ON),
           "seeds": int(seeds.notna().sum()), "mean": ratio, "ci95_low": low, "ci95_high": high, "baseline": base,
           "baseline_seeds": None if base is None else int(base_seeds.notna().sum()), "vs_baseline": math.nan,
           "vs_ci95_low": math.nan, "vs_ci95_high": math.nan}
    if base == label:  # against itself: 1 by definition, not a measurement
        return row | {"ci95_low": math.nan, "ci95_high": math.nan, "verdict": BASELINE}
    return row | {"verdict": NO_BASELINE if math.isnan(ratio) else verdict(low, high, null=1.0)}


def headline(intervals: pd.DataFrame) -> pd.DataFrame:
    """The rows of HEADLINE metrics."""
    return intervals[intervals["metric"].str.startswith(HEADLINE)]


def interval_cells(intervals: pd.DataFrame) -> pd.DataFrame:
    """The HEADLINE rows as text: group, metric, n, mean [95% CI], vs baseline [95% CI] (NO_BASELINE for a
    speedup: its own interval is the comparison), verdict (where a baseline was asked for)."""
    rows = headline(intervals)
    cells = pd.DataFrame({"group": rows["group"], "metric": rows["metric"],
                          "n": [_n(r) for r in rows.itertuples()],
                          "mean [95% CI]": [_mean_cell(r) for r in rows.itertuples()]})
    if rows["verdict"].notna().any():
        cells["vs baseline [95% CI]"] = [
            interval_text(r.vs_baseline, r.vs_ci95_low, r.vs_ci95_high, _places(r.mean)) for r in rows.itertuples()]
        cells["verdict"] = rows["verdict"].to_numpy()
    return cells.reset_index(drop=True)


def format_intervals(intervals: pd.DataFrame) -> str:
    """INTERVALS_NOTE and interval_cells as aligned text."""
    return f"{INTERVALS_NOTE}\n{interval_cells(intervals).to_string(index=False)}"


def agreement_table(here: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """The rows of the module docstring: each HEADLINE verdict of `here` (an interval_table) beside the same group's
    and metric's in `other` (an interval_table of the other set, its groups labelled as here's)."""
    there = other.set_index(["group", "metric"])
    rows = []
    for _, r in headline(here).iterrows():
        if r.verdict in (None, BASELINE, NO_BASELINE):
            continue
        effect = _effect(r.metric, r)
        row = {"group": r.group, "metric": r.metric, "effect": effect, "verdict": r.verdict,
               "other_effect": math.nan, "other_verdict": "missing", "same_sign": None, "holds": "missing"}
        if (r.group, r.metric) in there.index:
            o = there.loc[(r.group, r.metric)]
            other_effect = _effect(r.metric, o)
            null = 1.0 if r.metric.startswith(SPEEDUP) else 0.0
            row |= {"other_effect": other_effect, "other_verdict": o["verdict"],
                    "same_sign": "yes" if np.sign(effect - null) == np.sign(other_effect - null) else "no",
                    "holds": ("missing" if o["verdict"] == NO_BASELINE   # the other set lacks the baseline
                              else NO_INTERVAL if NO_INTERVAL in (r.verdict, o["verdict"])
                              else "yes" if r.verdict == o["verdict"] else "no")}
        rows.append(row)
    return pd.DataFrame(rows, columns=["group", "metric", "effect", "verdict", "other_effect", "other_verdict",
                                       "same_sign", "holds"])


def format_agreement(agreement: pd.DataFrame) -> str:
    """AGREEMENT_NOTE and the agreement table as aligned text (effects to the decimals of their size)."""
    cells = agreement.copy()
    for column in ("effect", "other_effect"):
        cells[column] = [("-" if math.isnan(v) else f"{v:.{_places(v)}f}") for v in cells[column]]
    cells = cells.fillna("-")
    held = f"{(agreement['holds'] == 'yes').sum()} of {len(agreement)} verdicts hold"
    return f"{AGREEMENT_NOTE}; {held}\n{cells.to_string(index=False)}"


def _effect(metric: str, row) -> float:
    """A verdict's number: the speedup itself, else the difference from the baseline."""
    return row["mean"] if metric.startswith(SPEEDUP) else row["vs_baseline"]


def _mean_cell(row) -> str:
    if row.verdict == BASELINE and row.metric.startswith(SPEEDUP):
        return f"{row.mean:.3f}"  # 1 by definition: not a measurement, so neither an interval nor "n=1"
    return interval_text(row.mean, row.ci95_low, row.ci95_high, _places(row.mean))


def _n(row) -> str:
    """The group's seeds, and the baseline's where the interval compares the two ("3 vs 3")."""
    if row.baseline_seeds is None or pd.isna(row.baseline_seeds) or row.verdict == BASELINE:
        return str(row.seeds)
    return f"{row.seeds} vs {int(row.baseline_seeds)}"


def _places(value: float) -> int:
    return 3 if math.isnan(value) else _decimals(value)
