"""What compare's groups say against their baseline, with its uncertainty: every metric's mean over a group's seeds
with a 95% interval, the group's effect against the baseline's with its interval and the verdict it gives, and
whether the verdicts hold on a second set of the same runs (computed in another float summation order, e.g.
executor.threads=2, as another CPU would). The statistics are analysis.intervals', each metric on its scale
(analysis.scales: log for costs, logit for accuracies, the values themselves for amounts), the same scale for every
group, so that one model answers every question about a metric.

interval_table, one row per group and metric (intervals.csv):
  group, metric; scale ("log", "logit", "amount"); seeds (n: the group's seeds that gave a value: a target's cost
  counts the seeds that reached it); mean, ci95_low, ci95_high (the mean on the scale taken back: the geometric
  mean of a cost, the accuracy at the mean log-odds of an accuracy; Student's t; NaN where n < MIN_SEEDS);
  baseline (the group it is set against), baseline_seeds; vs_baseline, vs_ci95_low, vs_ci95_high: the effect
  against the baseline (Welch's t on the scale: a ratio of geometric means for a cost, 0.8 = 20% less; a
  difference for the rest); verdict ("higher", "lower", "within noise", TOO_FEW; BASELINE on the baseline's own
  rows, NO_BASELINE where a group has none). speedup@t rows: mean = the baseline's time to t over the group's
  (compare.csv's speedup@t), ci95_low/ci95_high its interval: exactly the reciprocal of the time_s@t row's ratio
  and interval, and its verdict the mirror of that row's ("higher" where the time is "lower"), so the two cannot
  disagree; vs_* empty.
agreement_table, one row per group and HEADLINE metric that has a verdict (sensitivity.csv): both sets' effect
  (the difference, the ratio, or the speedup) and verdict, whether the effect lies on the same side of no effect
  in both, and holds: "yes" where the verdicts are the same, "no" where not, TOO_FEW where either set has no
  interval, "missing" where the other set has no such group or none of its baseline.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.intervals import HIGHER, LOWER, TOO_FEW, effect_interval, mean_interval, verdict
from analysis.report import REACHED_ON
from analysis.scales import LOG, SCALES, scale_of

SPEEDUP = "speedup@"
BASELINE, NO_BASELINE = "baseline", "-"
# The metrics a study's verdicts are about: printed, shown in the report and checked by --against; intervals.csv
# holds every metric.
HEADLINE = (REACHED_ON, SPEEDUP, "final_accuracy", "final_local_accuracy")
COLUMNS = ["group", "metric", "scale", "seeds", "mean", "ci95_low", "ci95_high", "baseline", "baseline_seeds",
           "vs_baseline", "vs_ci95_low", "vs_ci95_high", "verdict"]
MIRROR = {HIGHER: LOWER, LOWER: HIGHER}  # a speed-up's verdict from its time's: less time is a higher speed-up


def interval_table(per_run: pd.DataFrame, metrics: list[str], against: dict[str, object] | None) -> pd.DataFrame:
    """The rows of the module docstring: per_run is compare's table of runs (a `group` column, the `metrics`),
    against maps each group to the label of its baseline group (NaN or None: it has none; against None: no
    baseline was asked for, so no verdicts and no speedups)."""
    values = {label: seeds for label, seeds in per_run.groupby("group", sort=False)}
    scales = {metric: scale_of(metric, per_run[metric]) for metric in metrics}  # one scale for every group
    rows = []
    for label, seeds in values.items():
        base = (against or {}).get(label)
        # NaN: no group to set it against; absent here: a second set (--against) lacks the baseline's runs
        base = None if base is None or (isinstance(base, float) and math.isnan(base)) or base not in values else base
        for metric in metrics:
            rows.append(_row(label, metric, scales[metric], seeds[metric], base,
                             values[base][metric] if base else None, against))
            if against is not None and metric.startswith(REACHED_ON):
                rows.append(_speedup_row(rows[-1]))
    return pd.DataFrame(rows, columns=COLUMNS)


def _row(label, metric, scale, seeds: pd.Series, base, base_seeds, against) -> dict:
    n, mean, low, high = mean_interval(seeds, scale)
    row = {"group": label, "metric": metric, "scale": scale.name, "seeds": n, "mean": mean, "ci95_low": low,
           "ci95_high": high, "baseline": base, "baseline_seeds": None, "vs_baseline": math.nan,
           "vs_ci95_low": math.nan, "vs_ci95_high": math.nan, "verdict": NO_BASELINE if against is not None else None}
    if base == label:
        return row | {"baseline_seeds": n, "verdict": BASELINE}
    if base is not None:
        effect, e_low, e_high = effect_interval(seeds, base_seeds, scale)
        row |= {"baseline_seeds": int(base_seeds.notna().sum()), "vs_baseline": effect, "vs_ci95_low": e_low,
                "vs_ci95_high": e_high,
                "verdict": verdict(e_low, e_high, scale.null) if not math.isnan(effect) else NO_BASELINE}
    return row


def _speedup_row(time: dict) -> dict:
    """speedup@t from its time_s@t row: the baseline's time over the group's, the reciprocal of the time's ratio
    (its bounds swapped), its verdict the time's mirrored. None where the time is not on the log scale (a time of
    0 has no ratio)."""
    row = time | {"metric": SPEEDUP + time["metric"].removeprefix(REACHED_ON), "mean": math.nan,
                  "ci95_low": math.nan, "ci95_high": math.nan, "vs_baseline": math.nan, "vs_ci95_low": math.nan,
                  "vs_ci95_high": math.nan}
    if time["verdict"] == BASELINE:  # against itself: 1 by definition, not a measurement
        return row | {"mean": 1.0}
    if time["scale"] != LOG.name or time["verdict"] == NO_BASELINE:
        return row | {"verdict": NO_BASELINE}
    with np.errstate(divide="ignore"):
        reciprocal = 1 / np.array([time["vs_baseline"], time["vs_ci95_high"], time["vs_ci95_low"]])
    return row | dict(zip(["mean", "ci95_low", "ci95_high"], map(float, reciprocal))) | {
        "verdict": MIRROR.get(time["verdict"], time["verdict"])}


def headline(intervals: pd.DataFrame) -> pd.DataFrame:
    """The rows of HEADLINE metrics."""
    return intervals[intervals["metric"].str.startswith(HEADLINE)]


def agreement_table(here: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """The rows of the module docstring: each HEADLINE verdict of `here` (an interval_table) beside the same group's
    and metric's in `other` (an interval_table of the other set, its groups labelled as here's)."""
    there = other.set_index(["group", "metric"])
    rows = []
    for _, r in headline(here).iterrows():
        if r.verdict in (None, BASELINE, NO_BASELINE):
            continue
        effect, null = effect_of(r.metric, r)
        row = {"group": r.group, "metric": r.metric, "effect": effect, "verdict": r.verdict,
               "other_effect": math.nan, "other_verdict": "missing", "same_sign": None, "holds": "missing"}
        if (r.group, r.metric) in there.index:
            o = there.loc[(r.group, r.metric)]
            other_effect, _ = effect_of(r.metric, o)
            row |= {"other_effect": other_effect, "other_verdict": o["verdict"],
                    "same_sign": "yes" if np.sign(effect - null) == np.sign(other_effect - null) else "no",
                    "holds": ("missing" if o["verdict"] == NO_BASELINE   # the other set lacks the baseline
                              else TOO_FEW if TOO_FEW in (r.verdict, o["verdict"])
                              else "yes" if r.verdict == o["verdict"] else "no")}
        rows.append(row)
    return pd.DataFrame(rows, columns=["group", "metric", "effect", "verdict", "other_effect", "other_verdict",
                                       "same_sign", "holds"])


def effect_of(metric: str, row) -> tuple[float, float]:
    """A verdict's number and its value of no effect: the speedup itself against 1, else the effect against the
    baseline against its scale's null (1 for a ratio, 0 for a difference)."""
    if metric.startswith(SPEEDUP):
        return row["mean"], 1.0
    return row["vs_baseline"], SCALES[row["scale"]].null
