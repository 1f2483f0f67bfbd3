"""Several runs at once: local worker processes (`--jobs N`) or Ray tasks on a cluster (`--ray ADDRESS`).

Semantics:
- A job is one `run_scenario(..., quiet=True)` into its own run folder. It runs in a worker process (locally) or
  as a Ray task with one CPU (a cluster: `--out` must then be a folder every node sees, e.g. a shared mount).
- A job that fails (a TestbedError, or a crash) is reported with its error and the others go on; its folder's
  summary.json says how it ended, as for a serial run.
- A run's tables depend only on its scenario, its seed and its torch threads (executor.threads, one by default;
  testbed/execution/threads.py), which the run sets wherever it runs: bit for bit a serial run's, whichever worker
  runs it and in whatever order.
- Progress: one line per job as it ends (status, wall seconds, folder) with the count done so far.
"""
from __future__ import annotations

import sys
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Callable

from testbed import scenario as sc
from testbed.errors import TestbedError
from testbed.runner import Watch


@dataclass(frozen=True)
class Job:
    scenario: sc.Scenario
    source: str          # named in errors: the file and the combination
    out: Path            # root of run folders
    resume: bool
    label: str           # how progress lines name it
    watch: Watch = Watch()   # its trackers (and, in this process only, its on_round callbacks)


@dataclass(frozen=True)
class Outcome:
    job: Job
    error: str | None    # None when the run completed
    seconds: float


def run_job(job: Job) -> Outcome:
    """One run, never raising: what went wrong comes back as text (a traceback for a crash)."""
    from testbed.runner import run_scenario

    start = time.perf_counter()
    try:
        run_scenario(job.scenario, job.source, job.out, quiet=True, resume=job.resume, watch=job.watch)
        error = None
    except TestbedError as err:
        error = str(err)
    except Exception:  # a bug: its traceback, not a dead pool
        error = "crashed:\n" + traceback.format_exc()
    return Outcome(job, error, time.perf_counter() - start)


def run_jobs(jobs: list[Job], workers: int = 1, ray_address: str | None = None,
             on_done: Callable[[Outcome], None] = lambda outcome: None) -> list[Outcome]:
    """Run every job, `workers` at a time in local processes (or all as Ray tasks); calls on_done(outcome) in
    the order they end and returns the outcomes in the jobs' order."""
    if ray_address is not None:
        outcomes = _on_ray(jobs, ray_address, on_done)
    elif workers <= 1:
        outcomes = []
        for job in jobs:
            outcomes.append(run_job(job))
            on_done(outcomes[-1])
    else:
        outcomes = _in_processes(jobs, workers, on_done)
    order = {id(job): i for i, job in enumerate(jobs)}
    return sorted(outcomes, key=lambda o: order[id(o.job)])


def _in_processes(jobs: list[Job], workers: int, on_done) -> list[Outcome]:
    # spawn, not fork: a forked child of a process whose torch has started its thread pool can hang
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        pending = {pool.submit(run_job, job): job for job in jobs}
        outcomes = []
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                job = pending.pop(future)
                try:
                    outcome = replace(future.result(), job=job)   # the caller's Job, not the pickled copy
                except Exception as err:  # the worker process itself died (killed, out of memory)
                    outcome = Outcome(job, f"crashed: its worker process died ({type(err).__name__}: {err})", 0.0)
                outcomes.append(outcome)
                on_done(outcome)
    return outcomes


def _on_ray(jobs: list[Job], address: str, on_done) -> list[Outcome]:
    from testbed.execution.ray import start_ray

    ray, started = start_ray(None if address == "local" else address, None, "--ray")
    task = ray.remote(num_cpus=1, max_retries=1)(run_job)   # a task whose node died runs once more elsewhere
    try:
        pending = {task.remote(job): job for job in jobs}
        outcomes = []
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            job = pending.pop(done[0])
            try:
                outcome = replace(ray.get(done[0]), job=job)
            except Exception as err:  # the task failed twice (its worker or node died)
                outcome = Outcome(job, f"crashed: its Ray task failed ({type(err).__name__})", 0.0)
            outcomes.append(outcome)
            on_done(outcome)
        return outcomes
    finally:
        if started:
            ray.shutdown()


def progress_printer(total: int) -> Callable[[Outcome], None]:
    """on_done that prints '[k/total done] label: completed in 12.3 s (folder)' or the error on stderr."""
    done = 0

    def report(outcome: Outcome) -> None:
        nonlocal done
        done += 1
        head = f"[{done}/{total} done] {outcome.job.label}:"
        if outcome.error is None:
            print(f"{head} completed in {outcome.seconds:.1f} s", flush=True)
        else:
            print(f"{head} {outcome.error.splitlines()[0]}", file=sys.stderr, flush=True)
            if outcome.error.startswith("crashed:\n"):
                print(outcome.error, file=sys.stderr, flush=True)

    return report
