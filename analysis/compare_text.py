"""compare's printout, every line at most analysis.terminal.WIDTH characters: its notes wrapped; the groups'
mean±std over seeds (a block of whole-run columns, then a block per target: reached, time, speed-up, rounds and
cost to it); the 95% intervals and verdicts of the HEADLINE metrics, a block per group under a line naming it and
its baseline; and against a second set, which verdicts hold. The files hold every column and digit (compare.csv,
intervals.csv, sensitivity.csv). interval_cells, the intervals as one table of text, is also the report pages'
(analysis.pages).
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.intervals import MIN_SEEDS, TOO_FEW, interval_text
from analysis.report import REACHED_ON, _decimals, seed_table_cells
from analysis.scales import SCALES
from analysis.terminal import aligned_table, wrap
from analysis.verdicts import BASELINE, NO_BASELINE, SPEEDUP, headline

SEED_NOTE = ("mean±std over each group's seeds (sample std); a target's costs over the seeds that reached it "
             "(reached: of all); speedup: the baseline's time over the group's, their geometric means (as in the "
             "intervals below); acc: accuracy; every column: compare.csv")
RUN_COLUMNS = {"seeds": "seeds", "rounds": "rounds", "sim_time_s": "sim_time_s", "final_accuracy": "final_acc",
               "final_local_accuracy": "final_local_acc", "total_energy_J": "energy"}  # printed as
TARGET_COLUMNS = {"reached@": "reached", REACHED_ON: "time_s", SPEEDUP: "speedup", "rounds@": "rounds",
                  "uplink_MB@": "uplink_MB", "TFLOPs@": "TFLOPs", "energy_J@": "energy"}  # printed as
INTERVALS_NOTE = (f"95% intervals over each group's seeds (n: seeds with a value, the group's vs the baseline's). "
                  f"Costs (time, MB, TFLOPs, rounds, J) on a log scale: mean = geometric mean, vs baseline = the "
                  f"group's over the baseline's (0.800x: 20% less); accuracies on the logit scale, so intervals "
                  f"stay in [0, 1]: vs baseline = the difference. Verdict: higher or lower where the interval "
                  f"excludes no effect (1x, or 0), else within noise (these seeds cannot tell them apart); "
                  f"{TOO_FEW}: under {MIN_SEEDS} a side, no interval. speedup@t = the baseline's time over the "
                  f"group's, time_s@t's ratio upside down: their verdicts always agree. Method: "
                  f"analysis/intervals.py; every metric: intervals.csv")
AGREEMENT_NOTE = ("verdicts against the baseline in these runs and in --against's (the same groups, another "
                  "summation order: another executor.threads or CPU); holds: the same verdict in both")
VS = "vs baseline [95% CI]"


def compare_text(comparison, metric: str, notes: list[str] = ()) -> str:
    """The whole printout of compare's tables (an analysis.compare.Comparison), after the notes (skipped runs,
    mixed origins), each wrapped."""
    parts = [*(wrap(note, indent="  ") for note in notes), format_group_table(comparison.table, metric),
             format_intervals(comparison.intervals)]
    if comparison.agreement is not None:
        parts.append(format_agreement(comparison.agreement))
    return "\n\n".join(parts)


def format_group_table(table: pd.DataFrame, metric: str) -> str:
    """SEED_NOTE, the whole-run block and one block per target of compare.csv's table, as the module says."""
    cells = seed_table_cells(table)
    blocks = [wrap(SEED_NOTE), aligned_table(_block(cells, {c: RUN_COLUMNS[c] for c in RUN_COLUMNS if c in cells}))]
    for target in [c.removeprefix(REACHED_ON) for c in cells.columns if c.startswith(REACHED_ON)]:
        names = {f"{prefix}{target}": name for prefix, name in TARGET_COLUMNS.items()}
        blocks.append(f"to {metric} {target}:\n" + aligned_table(_block(cells, {c: n for c, n in names.items()
                                                                             if c in cells})))
    return "\n\n".join(blocks)


def _block(cells: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """The group column and `columns` of the cells, under their printed names."""
    return cells[["group", *columns]].rename(columns=columns)


def format_intervals(intervals: pd.DataFrame) -> str:
    """INTERVALS_NOTE, then per group a line naming it (and its baseline) and its HEADLINE rows: metric, n, mean
    [95% CI] and, against a baseline, the effect [95% CI] and verdict."""
    cells = interval_cells(intervals)
    asked = intervals["verdict"].notna().any()  # a baseline was asked for
    baseline_of = intervals.groupby("group", sort=False)["baseline"].first()
    blocks = [wrap(INTERVALS_NOTE)]
    for group, rows in cells.groupby("group", sort=False):
        base = baseline_of[group]
        title = (group if not asked else f"{group}: the baseline" if base == group
                 else f"{group}: no baseline under its conditions" if pd.isna(base) else f"{group} against {base}")
        if not asked or pd.isna(base) or base == group:  # nothing set against a baseline: no effect, no verdict
            rows = rows[~rows["metric"].str.startswith(SPEEDUP)].drop(columns=[VS, "verdict"], errors="ignore")
        blocks.append(wrap(title, indent="  ") + "\n" + aligned_table(rows.drop(columns="group"), indent="  ",
                                                                   left=("metric", "verdict")))
    return "\n\n".join(blocks)


def interval_cells(intervals: pd.DataFrame) -> pd.DataFrame:
    """The HEADLINE rows as text: group, metric, n, mean [95% CI], VS (a ratio "0.800x [...]" on the log scale;
    NO_BASELINE for a speedup: its own interval is the comparison) and verdict, where a baseline was asked for."""
    rows = headline(intervals)
    cells = pd.DataFrame({"group": rows["group"], "metric": rows["metric"],
                          "n": [_n(r) for r in rows.itertuples()],
                          "mean [95% CI]": [_mean_cell(r) for r in rows.itertuples()]})
    if rows["verdict"].notna().any():
        cells[VS] = [_vs_cell(r) for r in rows.itertuples()]
        cells["verdict"] = rows["verdict"].to_numpy()
    return cells.reset_index(drop=True)


def format_agreement(agreement: pd.DataFrame) -> str:
    """AGREEMENT_NOTE and the agreement table as aligned text (effects to the decimals of their size)."""
    cells = agreement.copy()
    for column in ("effect", "other_effect"):
        cells[column] = [("-" if math.isnan(v) else f"{v:.{_places(v)}f}") for v in cells[column]]
    cells = cells.fillna("-").rename(columns={"other_effect": "other", "other_verdict": "other verdict",
                                              "same_sign": "same sign"})
    held = f"{(agreement['holds'] == 'yes').sum()} of {len(agreement)} verdicts hold"
    return f"{wrap(f'{AGREEMENT_NOTE}; {held}')}\n{aligned_table(cells, left=('metric', 'verdict', 'other verdict'))}"


def _mean_cell(row) -> str:
    if row.verdict == BASELINE and row.metric.startswith(SPEEDUP):
        return f"{row.mean:.3f}"  # 1 by definition: not a measurement, so neither an interval nor "too few"
    text = interval_text(row.mean, row.ci95_low, row.ci95_high, _places(row.mean), row.seeds)
    return _as_ratio(text) if row.metric.startswith(SPEEDUP) else text


def _vs_cell(row) -> str:
    """The effect [95% CI], a ratio marked "x"; the effect alone where a side has too few seeds (the verdict says
    so); NO_BASELINE where there is none."""
    if math.isnan(row.vs_baseline):
        return NO_BASELINE
    places = 3 if SCALES[row.scale].ratio else _places(row.mean)
    text = (f"{row.vs_baseline:.{places}f}" if math.isnan(row.vs_ci95_low)
            else interval_text(row.vs_baseline, row.vs_ci95_low, row.vs_ci95_high, places))
    return _as_ratio(text) if SCALES[row.scale].ratio else text


def _as_ratio(text: str) -> str:
    """"1.250 [1.1, 1.4]" -> "1.250x [1.1, 1.4]": a ratio, not an amount."""
    number, _, rest = text.partition(" ")
    return f"{number}x {rest}".rstrip() if number != "-" else text


def _n(row) -> str:
    """The group's seeds, and the baseline's where the interval compares the two ("3 vs 3")."""
    if row.baseline_seeds is None or pd.isna(row.baseline_seeds) or row.verdict == BASELINE:
        return str(row.seeds)
    return f"{row.seeds} vs {int(row.baseline_seeds)}"


def _places(value: float) -> int:
    return 3 if math.isnan(value) else _decimals(value)
