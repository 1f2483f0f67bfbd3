"""analysis.terminal: prose and tables cut to a terminal's width, and the command's list of files written."""
import pandas as pd

from analysis.terminal import LABEL_WIDTH, fit_table, wrap
from testbed.cli import _written


def test_prose_wraps_at_words_and_a_path_longer_than_the_width_stays_whole():
    text = "word " * 50 + "\n\nshort\n" + "a/" * 60
    lines = wrap(text, width=40, indent="  ").splitlines()
    assert all(len(line) <= 40 for line in lines[:-1]) and lines[-1] == "a/" * 60
    assert lines[1].startswith("  word") and "" in lines and "short" in lines


def test_a_table_that_fits_is_one_block_aligned():
    cells = pd.DataFrame({"group": ["fedavg", "fedlps"], "time_s": ["31.0±1.0", "11.0±1.0"], "verdict": ["-", "lower"]})
    assert fit_table(cells, left=("verdict",)) == ("group     time_s  verdict\n"
                                                   "fedavg  31.0±1.0  -\n"
                                                   "fedlps  11.0±1.0  lower")


def test_a_wide_table_is_cut_into_blocks_each_led_by_the_first_column():
    cells = pd.DataFrame({"group": ["fedavg", "fedlps"], **{f"column_{i}": ["0.936±0.013"] * 2 for i in range(9)}})
    text = fit_table(cells, width=60)
    blocks = text.split("\n\n")
    assert len(blocks) == 3 and all(len(line) <= 60 for line in text.splitlines())
    assert all(block.splitlines()[1].startswith("fedavg") for block in blocks)
    assert sum(block.splitlines()[0].count("column_") for block in blocks) == 9   # every column once


def test_a_label_too_long_for_a_table_is_shortened_in_its_middle():
    label = "fedavg, heterogeneity=high, selection=availability, clients_per_round=10"
    shown = fit_table(pd.DataFrame({"group": [label], "n": ["3"]})).splitlines()[1]
    assert len(shown.split("  ")[0]) == LABEL_WIDTH and shown.startswith("fedavg, het") and "=10" in shown


def test_files_written_are_shown_relative_to_the_current_folder_where_under_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    written = _written([tmp_path / "runs" / "compare" / "compare.csv", tmp_path.parent / "elsewhere.csv"])
    assert written == f"\n\nwritten:\n  runs/compare/compare.csv\n  {tmp_path.parent / 'elsewhere.csv'}"
