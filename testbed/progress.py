"""What a run shows while it plays: a progress bar (simulated time, accuracy and the uplink's megabytes so far;
within a terminal's width, at most 100 columns) and each round's row logged to the run's trackers, with the lines
(say) where they keep it. A resumed run's bar and totals go on from the rows it kept."""
from __future__ import annotations

import os
import sys
from typing import Callable

from testbed.hooks import table_row


class Progress:
    """The round callback of one run: `write` (the run folder's) first, then the bar and the trackers (None where
    the run has none, else given `columns`' values of each row). Use it as a context manager: it closes the bar."""

    def __init__(self, scenario, played: int, kept: list[dict], quiet: bool, write: Callable[[dict, list], None],
                 trackers, columns: list[str]):
        from tqdm.auto import tqdm  # a notebook gets its own widget, a terminal the text bar

        self.write, self.trackers, self.columns, self.quiet = write, trackers, columns, quiet
        self.uplink = int(sum(row["bytes_up"] for row in kept))   # the kept rounds' uplink bytes
        self.bar = tqdm(total=scenario.stop.max_rounds, initial=played, unit="round", desc=scenario.name,
                        disable=quiet, ncols=_columns(tqdm))

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()

    def say(self, line: str) -> None:
        """A line on stdout, above the bar rather than through it, at once (a pipe's buffer would hold it till the
        run's end); nothing where the run is quiet. After the bar is closed too (tqdm's close marks it disabled,
        hence `quiet`)."""
        if not self.quiet:
            self.bar.write(line, file=sys.stdout)
            sys.stdout.flush()

    def on_round(self, record: dict, events: list[dict]) -> None:
        self.write(record, events)
        self.uplink += record["bytes_up"]
        self.bar.update(1)
        acc = record["accuracy"]
        self.bar.set_postfix_str(f"sim {record['t_end_s']:.0f}s acc {'-' if acc != acc else f'{acc:.3f}'} "
                                 f"up {self.uplink / 1e6:.1f}MB")
        if self.trackers is not None:
            self.trackers.log(table_row(record, self.columns))


def _columns(bar_class) -> int | None:
    """The text bar's width: the terminal's, at most analysis.terminal.WIDTH, and WIDTH where stderr is no
    terminal (a pipe, a log: tqdm would not bound the line). None for a notebook's widget, whose ncols are pixels."""
    from analysis.terminal import WIDTH

    if any(cls.__module__ == "tqdm.notebook" for cls in bar_class.__mro__):
        return None
    try:
        return min(os.get_terminal_size(sys.stderr.fileno()).columns, WIDTH)
    except (OSError, ValueError, AttributeError):  # not a terminal, or a stream without a descriptor (captured)
        return WIDTH
