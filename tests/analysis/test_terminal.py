"""Printed tables and notes fit a terminal (analysis/terminal.py): blocks of columns led by the row's name, a
target's columns together, long cells cut from the left, compare's aligned groups, prose wrapped at spaces, and
the command's list of files written."""
import pandas as pd
from helpers import printed_table

from analysis.terminal import LABEL_WIDTH, LONGEST_CELL, aligned_table, fit_table, wrap
from testbed.cli import _written


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


def test_prose_wraps_at_words_and_a_path_longer_than_the_width_stays_whole():
    text = "word " * 50 + "\n\nshort\n" + "a/" * 60
    lines = wrap(text, width=40, indent="  ").splitlines()
    assert all(len(line) <= 40 for line in lines[:-1]) and lines[-1] == "a/" * 60
    assert lines[1].startswith("  word") and "" in lines and "short" in lines


def test_a_table_that_fits_is_one_block_aligned():
    cells = pd.DataFrame({"group": ["fedavg", "fedlps"], "time_s": ["31.0±1.0", "11.0±1.0"], "verdict": ["-", "lower"]})
    assert aligned_table(cells, left=("verdict",)) == ("group     time_s  verdict\n"
                                                   "fedavg  31.0±1.0  -\n"
                                                   "fedlps  11.0±1.0  lower")


def test_a_wide_table_is_cut_into_blocks_each_led_by_the_first_column():
    cells = pd.DataFrame({"group": ["fedavg", "fedlps"], **{f"column_{i}": ["0.936±0.013"] * 2 for i in range(9)}})
    text = aligned_table(cells, width=60)
    blocks = text.split("\n\n")
    assert len(blocks) == 3 and all(len(line) <= 60 for line in text.splitlines())
    assert all(block.splitlines()[1].startswith("fedavg") for block in blocks)
    assert sum(block.splitlines()[0].count("column_") for block in blocks) == 9   # every column once


def test_a_label_too_long_for_a_table_is_shortened_in_its_middle():
    label = "fedavg, heterogeneity=high, selection=availability, clients_per_round=10"
    shown = aligned_table(pd.DataFrame({"group": [label], "n": ["3"]})).splitlines()[1]
    assert len(shown.split("  ")[0]) == LABEL_WIDTH and shown.startswith("fedavg, het") and "=10" in shown


def test_files_written_are_shown_relative_to_the_current_folder_where_under_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    written = _written([tmp_path / "runs" / "compare" / "compare.csv", tmp_path.parent / "elsewhere.csv"])
    assert written == f"\n\nwritten:\n  runs/compare/compare.csv\n  {tmp_path.parent / 'elsewhere.csv'}"
