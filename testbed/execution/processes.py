"""Worker processes (executor.workers): a round's clients trained in parallel processes on this machine's CPU.

Semantics:
- `executor: {kind: serial | batched, workers: N}` with N > 1 starts N worker processes when the run is built.
  Each builds the run's executor (serial or batched, with its options) on executor.threads torch threads, from
  the model and the training and test data it gets once at the start: the data through a file that every
  worker maps (one copy in the page cache, not one per worker), the model pickled; the strategy comes with the
  first round and again only when the engine hands over another object (a Strategy is frozen). A round's jobs are
  dealt to the workers, each trains its share, and the results come back in job order. Evaluation's forward
  passes are shared out too (`logits`: contiguous shares that start at multiples of EVAL_BATCH, computed in
  batches of EVAL_BATCH as score() computes them in one process); the run sums the losses and counts the hits.
  Aggregation and the clock stay in the run's process, on executor.threads.
- Tables: each job carries its own seed and trains on the same kernels on the same thread count, so a serial
  run's tables with N workers are those of workers: 1, bit for bit (tests/testbed/test_workers.py). The batched
  executor vmaps whatever a worker holds: jobs are dealt in whole groups of executor.max_clients, the groups the
  executor would vmap in one process, so with max_clients set the tables are batched's with workers: 1 bit for
  bit; without it each worker's share is one group, which rounds differently (as another max_clients would).
- Dealing: jobs (or max_clients groups) are given out longest first, each to the worker with the least work so
  far, work being samples processed x forward FLOPs a sample (a submodel's), so that a round waits for no
  worker much longer than for the others; a worker trains its share in job order.
- `workers: auto`: as many workers as there are cores free for executor.threads threads each, capped at the
  updates a round aggregates (no worker would have a job); a core is busy for as long as the machine's 1-minute
  load average says (os.getloadavg), read once when the run starts, so a busy machine gets 1: the run trains
  in its own process, as with workers: 1. The count goes to the "testbed" logger at INFO.
- Ctrl-C goes to the run alone (the workers ignore it); the run closes the pool on its way out, as at the end
  of a run: the workers are stopped, and a worker whose run died (SIGKILL) ends when it finds its pipe closed.
- A worker that dies (killed, out of memory) stops the run with one line naming executor.workers; the rounds
  already written are kept, and --resume goes on from the last checkpoint. An error inside a worker's training
  is raised in the run as it was raised there, with the worker's traceback as a note.
- Start: the workers are forked from multiprocessing's fork server, a fresh process that imports torch and this
  module once (about a second; the first pool of a process pays it, overlapped with the engine's set-up) and has
  started no thread pool of torch's, so that forking it is safe where forking the run (whose torch has threads) is not.
- Cost each round: the received model once per worker and the jobs' own tensors (kept state, masks) down the
  pipes, every update and kept state back; tensors cross as their raw bytes (pickle protocol 5 out of band),
  cnn_512's 2.3 MB in about a millisecond of pickling plus the pipe's copy (about 1 GB/s). Measured on W1
  (benchmarks/RESULTS.md, "CPU workers"): 15-25 ms a round over the slowest worker's share, 5-10 % of the
  round's training (10 clients of ~40 ms each); on 2 idle cores two workers made W1's rounds 1.23x faster and
  those of W1 at 5 epochs 1.70x. A round of a few tiny clients (logreg) costs more in the pipes than it saves.
- What the workers unpickle (the model, the strategy, plugins') must be importable there: a class defined in a
  notebook cell is not (define it in a module); a worker that cannot start says so in one line.
- Worker processes train on the CPU: workers > 1 with executor.device: cuda is refused in validation.
"""
from __future__ import annotations

import io
import logging
import os
import pickle
import shutil
import signal
import tempfile
import traceback
import weakref
from multiprocessing import get_context
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import torch

from testbed.algorithms.base import Result, Strategy
from testbed.data.dataset import Dataset
from testbed.errors import TestbedError
from testbed.execution.common import TrainJob
from testbed.execution.threads import DEFAULT_THREADS
from testbed.functional import EVAL_BATCH, logits

log = logging.getLogger("testbed")

_MAPPED = ("train_x", "train_y", "test_x", "test_y")   # the tensors every worker maps from a file, never sent


def workers_for(setting: int | str, threads: int | None, updates: int) -> int:
    """The worker processes a run starts for executor.workers `setting` (a count, or 'auto'); `updates`: the
    updates a round aggregates, `threads`: executor.threads."""
    if setting != "auto":
        return int(setting)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    free = max(cores - os.getloadavg()[0], 0.0)
    count = max(1, min(int(free + 0.5) // (threads or DEFAULT_THREADS), updates))
    log.info("executor.workers: auto gives %d (%d cores, load average %.2f, %d threads a worker, %d updates a "
             "round)", count, cores, os.getloadavg()[0], threads or DEFAULT_THREADS, updates)
    return count


def deal(costs: list[float], workers: int, group: int = 1) -> list[list[int]]:
    """Job indices for each worker: consecutive groups of `group` jobs, given out whole, the costliest first, each
    to the worker with the least cost so far (ties: the lower worker); each share in job order. Workers that
    would get nothing are left out."""
    groups = [list(range(start, min(start + group, len(costs)))) for start in range(0, len(costs), group)]
    load, shares = [0.0] * workers, [[] for _ in range(workers)]
    for g in sorted(range(len(groups)), key=lambda g: -sum(costs[i] for i in groups[g])):
        w = min(range(workers), key=lambda w: load[w])
        load[w] += sum(costs[i] for i in groups[g])
        shares[w] += groups[g]
    return [sorted(share) for share in shares if share]


class _Pickler(pickle.Pickler):
    """Pickles the run's training tensors (wherever they appear: the dataset, a strategy's server data) as a
    reference to the worker's mapped copy, and every other tensor that owns its memory whole as a numpy array out of
    band: its bytes go down the pipe as they lie in memory, with no copy into the pickle (torch's own pickling
    writes each storage through torch.save: W1's 23 MB of updates took 79 ms, against 1.4 ms). Views and other
    tensors: torch's pickling, which keeps their storage, offsets and strides."""

    def __init__(self, file, shared: dict[int, str], buffers: list | None):
        # no list for the buffers: they go in band, into the file
        super().__init__(file, protocol=5, buffer_callback=None if buffers is None else buffers.append)
        self.shared = shared

    def persistent_id(self, obj):
        return self.shared.get(id(obj)) if isinstance(obj, torch.Tensor) else None

    def reducer_override(self, obj):
        if type(obj) is torch.Tensor and _whole(obj):
            return torch.from_numpy, (obj.numpy(),)
        return NotImplemented


def _whole(t: torch.Tensor) -> bool:
    """Whether `t` is a plain CPU tensor laid out contiguously over the whole of its own storage."""
    if t.device.type != "cpu" or t.requires_grad or t.is_conj() or t.is_neg() or t.layout != torch.strided:
        return False
    if t.dtype not in _NUMPY or t.storage_offset() or t.untyped_storage().nbytes() != t.numel() * t.element_size():
        return False
    expected = 1
    for size, stride in zip(reversed(t.shape), reversed(t.stride())):
        if size > 1 and stride != expected:
            return False
        expected *= size
    return True


_NUMPY = {torch.float64, torch.float32, torch.float16, torch.int64, torch.int32, torch.int16, torch.int8,
          torch.uint8, torch.bool}


def _send(conn: Connection, value, shared: dict[int, str]) -> None:
    """`value` down the pipe: the sizes of its out-of-band buffers, the pickle, then each buffer."""
    buffers, file = [], io.BytesIO()
    _Pickler(file, shared, buffers).dump(value)
    raw = [buffer.raw() for buffer in buffers]
    conn.send_bytes(pickle.dumps([r.nbytes for r in raw]))
    conn.send_bytes(file.getbuffer())
    for r in raw:
        conn.send_bytes(r)


def _receive(conn: Connection, shared: dict[str, torch.Tensor]):
    sizes = pickle.loads(conn.recv_bytes())
    header = conn.recv_bytes()
    buffers = []
    for size in sizes:
        # torch's allocator, as a tensor trained in this process would have: the same alignment for its kernels
        buffer = torch.empty(size, dtype=torch.uint8).numpy()
        conn.recv_bytes_into(buffer)
        buffers.append(buffer)
    return _Unpickler(io.BytesIO(header), shared, buffers).load()


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, shared: dict[str, torch.Tensor], buffers: list):
        super().__init__(file, buffers=buffers)
        self.shared = shared

    def persistent_load(self, name):
        return self.shared[name]


def _mapped(folder: str, name: str, dtype: str, shape: tuple[int, ...]) -> torch.Tensor:
    # copy-on-write: reads share the page cache with every other worker, and nothing writes back to the file
    return torch.from_numpy(np.memmap(os.path.join(folder, name), dtype=dtype, mode="c", shape=shape))


def _serve(conn: Connection, folder: str, layout: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    """A worker's life: build the executor, say so, then train each share it is sent until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's: it closes the pool on its way out
    try:
        shared = {name: _mapped(folder, name, *layout[name]) for name in _MAPPED}
        with open(os.path.join(folder, "setup"), "rb") as file:
            executor_class, model, name, num_classes, options, threads = _Unpickler(file, shared, None).load()
        torch.set_num_threads(threads or DEFAULT_THREADS)  # the run's count: the same arithmetic as in the run
        executor = executor_class(model, Dataset(name, *(shared[n] for n in _MAPPED), num_classes), **options)
    except BaseException as err:
        _send(conn, ("error", _error(err)), {})
        return
    _send(conn, ("ready", None), {})
    strategy = None
    while True:
        try:
            verb, payload = _receive(conn, shared)
        except (EOFError, OSError):  # the run closed the pipe, or died
            return
        try:
            if verb == "logits":
                reply = ("ok", logits(model, *payload))
            else:
                sent, jobs = payload
                strategy = sent if sent is not None else strategy
                reply = ("ok", executor.train(strategy, jobs))
        except BaseException as err:
            reply = ("error", _error(err))
        try:
            _send(conn, reply, {})
        except OSError:  # the run died while this share trained
            return


def _error(err: BaseException) -> tuple[BaseException | None, str]:
    """The exception, if it pickles, and its traceback as text."""
    text = "".join(traceback.format_exception(err))
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:
        return None, text
    return err, text


class ProcessExecutor:
    """The run's executor (`executor_class` with `options`), in `workers` worker processes."""

    def __init__(self, executor_class: type, model: torch.nn.Module, dataset: Dataset, workers: int,
                 threads: int | None, **options: Any):
        self.group = options.get("max_clients") or 1
        self.folder = tempfile.mkdtemp(prefix="testbed-workers-")
        layout = {}
        for name in _MAPPED:
            array = getattr(dataset, name).contiguous().numpy()
            array.tofile(os.path.join(self.folder, name))
            layout[name] = (array.dtype.str, array.shape)
        self.kept = [getattr(dataset, name) for name in _MAPPED]  # alive, so that no other tensor takes their ids
        self.shared = {id(tensor): name for tensor, name in zip(self.kept, _MAPPED)}
        # a file, not the process's arguments: start() would write those into a pipe that each new worker reads in turn
        with open(os.path.join(self.folder, "setup"), "wb") as file:
            _Pickler(file, self.shared, None).dump((executor_class, model, dataset.name, dataset.num_classes,
                                                    options, threads))
        # not fork: a forked child of a process whose torch has started threads can hang. The fork server is a fresh
        # process that imports torch and this module once (a second or two) and forks every worker of the run's
        # process from there, single-threaded: the workers of a pool, and of later pools, start without importing
        context = get_context("forkserver")
        context.set_forkserver_preload([__name__])
        self.processes, self.pipes = [], []
        for _ in range(workers):
            pipe, end = context.Pipe()
            process = context.Process(target=_serve, args=(end, self.folder, layout), daemon=True,
                                      name="testbed-worker")
            process.start()
            end.close()  # the worker's end lives in the worker alone: its death closes the pipe here
            self.processes.append(process)
            self.pipes.append(pipe)
        self._stop = weakref.finalize(self, _stop, self.processes, self.pipes, self.folder)
        self.ready = False
        self.strategy = None     # the strategy the workers hold
        self.round = None

    def train(self, strategy: Strategy, jobs: list[TrainJob]) -> list[Result]:
        if not jobs:
            return []
        self.round = jobs[0].task.round
        if not self.ready:
            self._wait_ready()
        costs = [job.task.samples_processed * (job.task.forward_flops or 1) for job in jobs]
        shares = deal(costs, len(self.processes), self.group)
        sent = None if strategy is self.strategy else strategy
        for w, share in enumerate(shares):
            self._send(w, ("train", (sent, [jobs[i] for i in share])))
        self.strategy = strategy
        results = [None] * len(jobs)
        for w, share in enumerate(shares):
            for i, result in zip(share, self._receive(w)):
                results[i] = result
        return results

    def logits(self, params: dict, x: torch.Tensor) -> torch.Tensor:
        """The model's logits of `params` on x's samples, computed by the workers in contiguous shares that start at
        multiples of EVAL_BATCH, each in batches of EVAL_BATCH: the batches, and so the floats, of score() in one
        process. The run's test set travels as a reference to the workers' mapped copy; other samples are sent."""
        if not self.ready:
            self._wait_ready()
        batches = -(-len(x) // EVAL_BATCH)
        bounds = [min(len(x), EVAL_BATCH * (batches * w // len(self.processes))) for w in range(len(self.processes) + 1)]
        shares = [(start, end) for start, end in zip(bounds, bounds[1:]) if end > start]
        for w, (start, end) in enumerate(shares):
            self._send(w, ("logits", (params, x, start, end)))
        return torch.cat([self._receive(w) for w in range(len(shares))])

    def _wait_ready(self) -> None:
        for w in range(len(self.processes)):
            self._receive(w, starting=True)
        shutil.rmtree(self.folder, ignore_errors=True)  # every worker has mapped the data: the pages stay theirs
        self.ready = True

    def _send(self, w: int, value) -> None:
        try:
            _send(self.pipes[w], value, self.shared)
        except OSError:
            self._died(w)

    def _receive(self, w: int, starting: bool = False):
        try:
            status, value = _receive(self.pipes[w], {})
        except (EOFError, OSError):
            self._died(w)
        if status == "error":
            err, text = value
            self.close()  # the other workers' replies of this round would be read as the next round's
            if starting:
                raise TestbedError(f"executor.workers: worker process {w + 1} could not start: "
                                   f"{text.strip().splitlines()[-1]}") from None
            if err is None:
                raise RuntimeError(f"executor.workers: worker process {w + 1} failed:\n{text}")
            err.add_note(f"raised in worker process {w + 1} of executor.workers:\n{text}")
            raise err
        return value

    def _died(self, w: int):
        process = self.processes[w]
        process.join(timeout=5)
        code = process.exitcode
        how = ("was killed (SIGKILL: out of memory, or kill -9)" if code == -signal.SIGKILL
               else f"ended by signal {signal.Signals(-code).name}" if code is not None and code < 0
               else f"exited with code {code}")
        self.close()
        when = f"in round {self.round}" if self.ready else "while starting (its error, if any, is above)"
        raise TestbedError(f"executor.workers: worker process {w + 1} of {len(self.processes)} {how} {when}; the "
                           "rounds before it are kept, and --resume goes on from the last checkpoint") from None

    def close(self) -> None:
        self._stop()


def _stop(processes, pipes, folder: str) -> None:
    """Stop the workers (they hold nothing worth keeping) and remove the data file if no worker came to map it."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process, pipe in zip(processes, pipes):
        process.join(timeout=5)
        pipe.close()
    shutil.rmtree(folder, ignore_errors=True)
