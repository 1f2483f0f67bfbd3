"""Text that fits a terminal: what `testbed run | sweep | report` print stays within WIDTH columns (issue 46: the
run's table was 171 wide and wrapped into an unreadable mess in an 80-column terminal). A table too wide is split
into blocks of columns, each repeating the columns that name its rows; prose is wrapped at spaces. The csv files
and report pages keep every table whole: only what is printed is cut. `fit_table` prints as pandas does (run's and
report's tables), `aligned_table` as compare prints its groups."""

from __future__ import annotations

import textwrap

import pandas as pd

WIDTH = 100   # the most columns a printed line takes (issue 46's bound; a path too long for it is never cut)
LONGEST_CELL = 40  # a longer cell (a run labelled by its folder) is cut from the left: its end tells runs apart
LABEL_WIDTH = 48  # compare's group label at most: with one more column a block still fits
ELLIPSIS = "..."
TARGET = "@"  # the columns of one target ("time_s@0.9", "rounds@0.9") stay in one block where they fit


def fit_table(cells: pd.DataFrame, keys: list[str], width: int = WIDTH) -> str:
    """`cells` (a table's text, as pandas prints it without the index) in blocks of columns at most `width` wide,
    a blank line between blocks; the `keys` columns (those that name a row) start every block. The columns keep
    their order, and those of one target stay together where they fit."""
    cells = cells.map(_shortened)
    rest = [column for column in cells.columns if column not in keys]
    blocks, block = [], []
    for unit in _units(cells, keys, rest, width):
        if block and _width(cells[keys + block + unit]) > width:
            blocks.append(block)
            block = []
        block += unit
    blocks.append(block)
    return "\n\n".join(cells[keys + block].to_string(index=False) for block in blocks)


def _units(cells: pd.DataFrame, keys: list[str], columns: list[str], width: int) -> list[list[str]]:
    """The columns in runs that go into one block together: a target's columns (one suffix after TARGET), each
    other column alone; a run wider than a block by itself comes apart into its columns."""
    units: list[list[str]] = []
    for column in columns:
        suffix = column.partition(TARGET)[2]
        if suffix and units and units[-1][-1].partition(TARGET)[2] == suffix:
            units[-1].append(column)
        else:
            units.append([column])
    return [part for unit in units
            for part in ([unit] if _width(cells[keys + unit]) <= width else [[column] for column in unit])]


def _width(cells: pd.DataFrame) -> int:
    return max(map(len, cells.to_string(index=False).splitlines()))


def _shortened(cell) -> str:
    text = str(cell)
    return text if len(text) <= LONGEST_CELL else "..." + text[-(LONGEST_CELL - 3):]


def wrap(text: str, width: int = WIDTH, indent: str = "  ") -> str:
    """Each line of `text` longer than `width` wrapped at spaces, its continuation indented by `indent`; a word
    longer than a line (a path) is never cut, so that it can still be copied."""
    return "\n".join(textwrap.fill(line, width, subsequent_indent=indent, break_long_words=False,
                                   break_on_hyphens=False) if len(line) > width else line
                     for line in text.splitlines())


def aligned_table(cells: pd.DataFrame, width: int = WIDTH, indent: str = "", left: tuple[str, ...] = ()) -> str:
    """The cells (text; the header is the column names) as aligned columns, two spaces apart, the first column
    left-aligned and the others right-aligned (`left` names more left-aligned ones), as compare prints its groups;
    where they do not fit `width`, cut into blocks one under another, each repeating the first column. A first cell
    longer than LABEL_WIDTH is shortened in its middle ("fedavg, heter...on=oort"): the files hold it whole."""
    columns = [str(c) for c in cells.columns]
    text = [[str(v) for v in cells.iloc[:, i]] for i in range(len(columns))]
    text[0] = [_middle_shortened(v) for v in text[0]]
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


def _middle_shortened(label: str) -> str:
    if len(label) <= LABEL_WIDTH:
        return label
    keep = LABEL_WIDTH - len(ELLIPSIS)
    return label[:keep - keep // 3] + ELLIPSIS + label[len(label) - keep // 3:]
