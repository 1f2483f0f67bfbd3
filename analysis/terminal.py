"""Text that fits a terminal: what `testbed run | sweep | report` print stays within WIDTH columns (issue 46: the
run's table was 171 wide and wrapped into an unreadable mess in an 80-column terminal). A table too wide is split
into blocks of columns, each repeating the columns that name its rows; prose is wrapped at spaces. The csv files
and report pages keep every table whole: only what is printed is cut."""

from __future__ import annotations

import textwrap

import pandas as pd

WIDTH = 100   # the most columns a printed line takes (issue 46's bound; a path too long for it is never cut)
LONGEST_CELL = 40  # a longer cell (a run labelled by its folder) is cut from the left: its end tells runs apart
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


def wrap(text: str, width: int = WIDTH) -> str:
    """Each line of `text` wrapped at spaces to `width`, its continuation indented two spaces; a word longer than
    a line (a path) is never cut, so that it can still be copied."""
    return "\n".join(textwrap.fill(line, width, subsequent_indent="  ", break_long_words=False,
                                   break_on_hyphens=False) if len(line) > width else line
                     for line in text.splitlines())
