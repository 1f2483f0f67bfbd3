"""How many torch threads a run computes with (executor.threads), so that its tables do not depend on where it ran.

Semantics:
- A CPU kernel may round differently with another thread count (a matrix product or a convolution's gradient splits
  its sums between threads), so a run's tables are a function of its scenario, its seed and the number of torch
  threads it trained and evaluated with. summary.json records that number (torch_threads).
- executor.threads: T runs the whole run on T threads wherever it runs: alone, in a `--jobs N` worker process or
  as a Ray task (and each worker of executor.kind ray trains on T). Its tables are then the same in every case.
- Unset, a run uses its process's count, as before: torch's default (all cores) for `testbed run` and a serial
  sweep, cores // N in a `--jobs N` worker, one in a Ray task or worker. A parallel sweep says so in one line when
  that count differs from a serial run's.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch


@contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """The block runs on `threads` torch threads (None: as many as now); the count is put back after it.
    Yields the count the block runs with."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        if threads is not None:
            torch.set_num_threads(before)


def parallel_note(executors: list, per_worker: int) -> str | None:
    """The line a `--jobs N` sweep prints when runs that leave executor.threads unset would train on another
    thread count (`per_worker`) than alone in this process; None when no run is affected."""
    alone = torch.get_num_threads()
    unset = sum(1 for e in executors if e.threads is None)
    if not unset or per_worker == alone:
        return None
    return (f"note: {unset} run(s) leave executor.threads unset, so they train on {per_worker} torch thread(s) each "
            f"in a worker, not {alone} as alone; a CPU kernel may round differently with another thread count, so "
            f"their tables may differ in the last digits from a serial run's. --set executor.threads={per_worker} "
            "makes them identical wherever they run")
