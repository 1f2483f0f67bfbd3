"""What the studies' table scripts share: a mean ± std cell of a per-setup row."""
import math


def plus_minus(row, column: str, digits: int) -> str:
    """row[column] ± row[column_std] to `digits` decimals; n/a where no seed gave a value."""
    value, std = row[column], row[f"{column}_std"]
    return "n/a" if math.isnan(value) else f"{value:.{digits}f} ± {std:.{digits}f}"
