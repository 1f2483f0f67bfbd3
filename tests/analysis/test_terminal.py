"""Printed tables and notes fit a terminal (analysis/terminal.py): blocks of columns led by the row's name, a
target's columns together, long cells cut from the left, prose wrapped at spaces."""
import pandas as pd
from helpers import printed_table

from analysis.terminal import LONGEST_CELL, fit_table, wrap


def _table(rows: int = 2) -> pd.DataFrame:
    columns = ["run", "final_accuracy", "best_accuracy", "last3_accuracy",
               *(f"{what}@{t}" for t in ("0.8", "0.9") for what in ("time_s", "uplink_MB", "rounds"))]
    return pd.DataFrame([[f"tiny/{r}", *(f"{r + c / 10:.3f}" for c in range(len(columns) - 1))]
                         for r in range(rows)], columns=columns)


def test_a_wide_table_comes_in_blocks_led_by_its_key_and_reads_back_whole():
    table = _table()
    text = fit_table(table, ["run"], width=60)
    blocks = text.split("\n\n")
    assert len(blocks) > 1 and max(map(len, text.splitlines())) <= 60
    assert all(block.split()[0] == "run" for block in blocks)
    # a target's three columns stay in one block
    assert any(all(f"{what}@0.9" in block for what in ("time_s", "uplink_MB", "rounds")) for block in blocks)
    assert printed_table(text, "run") == table.to_dict("records")


def test_a_narrow_table_is_printed_as_pandas_prints_it():
    table = _table()
    assert fit_table(table, ["run"], width=1000) == table.to_string(index=False)


def test_a_long_cell_keeps_its_end():
    label = "/a/very/long/folder/that/holds/the/runs/of/a/study/tiny/0"
    text = fit_table(pd.DataFrame({"run": [label], "rounds": ["3"]}), ["run"])
    cell = text.splitlines()[1].split()[0]
    assert len(cell) == LONGEST_CELL and cell.startswith("...") and label.endswith(cell[3:])


def test_wrap_keeps_short_lines_and_paths_whole():
    path = "runs/" + "x" * 120
    assert wrap("short\nline") == "short\nline"
    wrapped = wrap(f"a note that names {path} and goes on", width=40).splitlines()
    assert f"  {path}" in wrapped and all(line.startswith("  ") for line in wrapped[1:])
