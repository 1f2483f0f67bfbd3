"""How many torch threads a run computes with (executor.threads), so that its tables do not depend on where it ran.

Semantics:
- A CPU kernel may round differently with another thread count (a matrix product or a convolution's gradient splits
  its sums between threads), so a run's tables are a function of its scenario, its seed and the number of torch
  threads it trained and evaluated with. summary.json records that number (torch_threads).
- executor.threads: T runs the whole run on T threads wherever it runs: alone, in a `--jobs N` worker process or
  as a Ray task (and each worker of executor.kind ray trains on T). Unset, it is DEFAULT_THREADS, one thread, the
  same everywhere, so a run's tables are the same on any machine, serial or in parallel.
- Why one: `benchmarks/threads.py` (RESULTS.md, issue 27) times `testbed run` on one thread and on every core,
  alone and beside busy neighbours. On 2 idle cores two threads save a sixth to a quarter of a 20-round run (W1
  0.85x, the quickstart 0.75x; 1.00-1.10x at 5 rounds), but beside one busy process they take 1.24-1.49x as long
  at 5 rounds and 2.3x at 20 (one thread descheduled, the other waits at every kernel's barrier), and 1.7-2.1x on
  a machine loaded by several. A run alone on an idle machine may set executor.threads to its cores.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch

DEFAULT_THREADS = 1


@contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """The block runs on `threads` torch threads (None: DEFAULT_THREADS); the count is put back after it.
    Yields the count the block runs with."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads or DEFAULT_THREADS)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)

