"""What the studies' table scripts share: the columns of a per-setup row over its seeds, and their cells.

seed_columns: the mean and the std over seeds (population std, ddof=0, as the published tables were made) and the
95% interval of the mean on the column's scale (analysis/intervals.py, analysis/scales.py: a cost's geometric mean
on logs, an accuracy's on logits, an amount's Student's t cut at 0; NaN for one seed) with its center. A cell is
"mean ± std", or with --intervals "center [low, high]" ("center (1 seed; need 2)" for one seed)."""
import math

from analysis.intervals import interval_text, mean_interval
from analysis.scales import scale_of


def seed_columns(values, column: str) -> dict:
    """column, column_std, and column_center, column_ci95_low, column_ci95_high of the seeds' values (NaN left
    out of the interval)."""
    n, center, low, high = mean_interval(values, scale_of(column, values))
    return {column: values.mean(), f"{column}_std": values.std(ddof=0), f"{column}_center": center,
            f"{column}_ci95_low": low, f"{column}_ci95_high": high, f"{column}_n": n}


def plus_minus(row, column: str, digits: int) -> str:
    """row[column] ± row[column_std] to `digits` decimals; n/a where no seed gave a value."""
    value, std = row[column], row[f"{column}_std"]
    return "n/a" if math.isnan(value) else f"{value:.{digits}f} ± {std:.{digits}f}"


def in_interval(row, column: str, digits: int) -> str:
    """row[column_center] [row[column_ci95_low], row[column_ci95_high]] to `digits` decimals; n/a where no seed gave
    a value."""
    center = row[f"{column}_center"]
    return "n/a" if math.isnan(center) else interval_text(center, row[f"{column}_ci95_low"],
                                                          row[f"{column}_ci95_high"], digits,
                                                          int(row[f"{column}_n"]))
