"""What the studies' table scripts share: the columns of a per-setup row over its seeds, and their cells.

seed_columns: the mean and the std over seeds (population std, ddof=0, as the published tables were made) and the
95% interval of the mean (Student's t, analysis/intervals.py; NaN for one seed). A cell is "mean ± std", or with
--intervals "mean [low, high]" ("mean (n=1)" for one seed)."""
import math

from analysis.intervals import interval_text, mean_interval


def seed_columns(values, column: str) -> dict:
    """column, column_std, column_ci95_low, column_ci95_high of the seeds' values (NaN left out of the interval)."""
    _, _, low, high = mean_interval(values)
    return {column: values.mean(), f"{column}_std": values.std(ddof=0), f"{column}_ci95_low": low,
            f"{column}_ci95_high": high}


def plus_minus(row, column: str, digits: int) -> str:
    """row[column] ± row[column_std] to `digits` decimals; n/a where no seed gave a value."""
    value, std = row[column], row[f"{column}_std"]
    return "n/a" if math.isnan(value) else f"{value:.{digits}f} ± {std:.{digits}f}"


def in_interval(row, column: str, digits: int) -> str:
    """row[column] [row[column_ci95_low], row[column_ci95_high]] to `digits` decimals; n/a where no seed gave a
    value."""
    value = row[column]
    return "n/a" if math.isnan(value) else interval_text(value, row[f"{column}_ci95_low"],
                                                         row[f"{column}_ci95_high"], digits)
