"""Text that fits a terminal of WIDTH characters, as compare prints it.

- wrap: each line of a text wrapped at spaces to at most `width` characters, later lines of a paragraph indented by
  `indent`; a word longer than the width (a path) stays whole on a line of its own, the one thing that may pass it.
- fit_table: a table of text cells as aligned columns, two spaces apart, the first column left-aligned and the
  others right-aligned (`left` names more left-aligned ones); where the columns do not fit the width, they are cut
  into blocks, one under another, each block repeating the first column, so a row is read across its blocks by its
  first cell. A first cell longer than LABEL_WIDTH is shortened in its middle ("fedavg, heter...on=oort"): the
  files hold it whole.
"""

from __future__ import annotations

import textwrap

import pandas as pd

WIDTH = 100
LABEL_WIDTH = 48  # a first cell's longest: with one more column a block still fits, and most labels are shorter
ELLIPSIS = "..."


def wrap(text: str, width: int = WIDTH, indent: str = "") -> str:
    """Every line of text wrapped as the module docstring says."""
    return "\n".join(textwrap.fill(line, width, subsequent_indent=indent, break_long_words=False,
                                   break_on_hyphens=False) if line.strip() else line
                     for line in text.splitlines())


def fit_table(cells: pd.DataFrame, width: int = WIDTH, indent: str = "", left: tuple[str, ...] = ()) -> str:
    """The cells (text; the header is the column names) as the module docstring's fit_table."""
    columns = [str(c) for c in cells.columns]
    text = [[str(v) for v in cells.iloc[:, i]] for i in range(len(columns))]
    text[0] = [_shortened(v) for v in text[0]]
    widths = [max(len(c), *map(len, values)) if values else len(c) for c, values in zip(columns, text)]
    blocks, block = [], [0]
    for i in range(1, len(columns)):  # greedily: as many columns as fit beside the first
        if len(block) > 1 and len(indent) + sum(widths[j] + 2 for j in [*block, i]) - 2 > width:
            blocks.append(block)
            block = [0]
        block.append(i)
    blocks.append(block)

    def line(i_row: int | None, block: list[int]) -> str:
        parts = []
        for j in block:
            value = columns[j] if i_row is None else text[j][i_row]
            parts.append(value.ljust(widths[j]) if j == 0 or columns[j] in left else value.rjust(widths[j]))
        return (indent + "  ".join(parts)).rstrip()

    return "\n\n".join("\n".join(line(i, b) for i in [None, *range(len(cells))]) for b in blocks)


def _shortened(label: str) -> str:
    if len(label) <= LABEL_WIDTH:
        return label
    keep = LABEL_WIDTH - len(ELLIPSIS)
    return label[:keep - keep // 3] + ELLIPSIS + label[len(label) - keep // 3:]
