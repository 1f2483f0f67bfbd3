"""`testbed calibrate`: measure this machine's training ops and fit the latency clock's predictors to them.

What it runs: small networks (networks.py: the zoo's own layers, sampled layers, small CNNs, MLPs and recurrent
nets, with classifiers of 2 to 10,000 outputs), at sampled batch sizes, each trained for real with the step
trace.py defines (its optimizer's update included). For each network it times, in rounds (timing.py)
- every op of its step, timed inside the step less the timing's own overhead (the median over OP_STEPS steps):
  the samples of that op name's predictor;
- the whole step (the median of a short burst): the samples of the step terms (devices/latency.py);
keeping the fastest of each over the rounds. Networks are drawn from a seeded generator, so two calibrations of one
machine measure the same networks in the same order.
"""
from __future__ import annotations

import datetime
import itertools
import statistics
import sys
import time
from collections import defaultdict

import numpy as np
import torch

from devices.latency import GROUPS, Calibrated, Roofline, fit_op, relative_nnls
from testbed.latency.networks import Workload, workloads
from testbed.latency.timing import Fastest, in_round_order, median_seconds, synced_clock
from testbed.latency.trace import Recorder, _batch, default_optimizer, run_step, trace_step

FIT_SHARE = 0.9          # of the budget spent measuring; the rest is left for the fit and the file
MIN_NETWORKS = 8         # measured whatever the budget (a busy machine may spend a short one on the first few)
FIRST_ROUND = 0.4        # of the measuring time spent on new networks; the rest re-measures them (timing.py)
STEP_BURST_S = 0.05      # a step's median is over repeats that fit in this (at least 3)
FLOOR_S = 1e-7           # an op's time at least: a trivial op called from C++ (its timing's overhead taken off)
RATE_MIN_S = 20e-6       # ops shorter than this say little of a rate (the fallback roofline's)
OP_STEPS = 5            # steps whose ops are timed, per network (the median of each op's times)
MAX_SAMPLES = 1000       # an op name keeps at most this many for its nearest-neighbour factor (the file's size:
                         # 0.8 MB for a 180 s calibration of the development VM, where 160 lost the matmuls' and
                         # small ops' neighbours: 2 points less of the zoo within 15% over nine saved runs)


class Measurement:
    """One network's real step: its tensors, its time, and its ops' times inside it, the fastest of its rounds."""

    def __init__(self, work: Workload, device: str):
        self.work, self.device = work, device
        self.model = work.model.to(device)
        self.params = {n: p.detach().clone().requires_grad_(True) for n, p in self.model.named_parameters()}
        self.buffers = {n: b.detach().clone() for n, b in self.model.named_buffers()}
        self.x = _batch(work.sample, work.batch_size).to(device)
        self.optimizer = default_optimizer()
        self.state = self.optimizer.init({n: p.detach() for n, p in self.params.items()})
        # the ops as a prediction sees them: traced on fake tensors (a fused LSTM's workspace is another size there)
        self.trace = trace_step(work.model, work.sample, work.batch_size)
        self.fastest = Fastest()

    def step(self):
        return run_step(self.model, self.params, self.buffers, self.x, self.optimizer, self.state)

    def step_seconds(self, budget_s: float) -> float:
        return median_seconds(self.step, self.device, budget_s)

    def op_seconds(self, overhead_s: float, steps: int = OP_STEPS) -> dict[int, float]:
        """Each op of the step timed inside it (trace.Recorder), less the timing's own overhead: by the op's
        index in the step, the median over `steps` steps; none where the real step dispatched other ops than its
        fake trace (the network then adds no op samples)."""
        names = [op.name for op in self.trace.ops]
        runs = []
        for _ in range(steps):
            recorder = Recorder(synced_clock(self.device))
            with recorder:
                self.step()
            if [op.name for op in recorder.ops] == names:
                runs.append(recorder.seconds)
        if not runs:
            return {}
        return {i: max(FLOOR_S, statistics.median(r[i] for r in runs) - overhead_s) for i in range(len(names))}

    def take(self, overhead_s: float) -> None:
        """One round: the step's time and its ops' times."""
        self.fastest.add({"step": self.step_seconds(STEP_BURST_S)} | self.op_seconds(overhead_s))

    def samples(self) -> list[tuple[object, float]]:
        return op_samples(self.trace, self.fastest)


def op_samples(trace, fastest: Fastest) -> list[tuple[object, float]]:
    """A network's (op, seconds) samples: each op of its step that was timed, at its fastest."""
    return [(op, fastest.best[i]) for i, op in enumerate(trace.ops) if i in fastest.best]


def timing_overhead(device: str) -> float:
    """What trace.Recorder's timing adds to an op: the median recorded time of a trivial op (aten.alias of one
    element), which a step's C++ autograd engine would call for a fraction of a microsecond."""
    x = torch.zeros(1, device=device)
    recorder = Recorder(synced_clock(device))
    with recorder:
        for _ in range(200):
            torch.ops.aten.alias.default(x)
    return statistics.median(recorder.seconds)


def measure(budget_s: float, device: str = "cpu", progress=None, seed: int = 0) -> list[Measurement]:
    """Networks measured in rounds (timing.py): new networks for FIRST_ROUND of the measuring time (at least
    MIN_NETWORKS), then rounds over the same ones until FIT_SHARE of the budget is spent."""
    start, end = time.perf_counter(), FIT_SHARE * budget_s
    elapsed = lambda: time.perf_counter() - start   # noqa: E731
    overhead = timing_overhead(device)
    nets = new_networks(FIRST_ROUND * end, device, overhead, progress, seed)
    rounds = itertools.count(1)
    while elapsed() < end:
        measure_round(in_round_order(nets, next(rounds)), overhead, lambda: elapsed() / end, progress)
    return nets


def new_networks(seconds: float, device: str, overhead: float, progress=None, seed: int = 0) -> list[Measurement]:
    """The first round: new networks, each measured once, for `seconds` (at least MIN_NETWORKS of them)."""
    nets: list[Measurement] = []
    start = time.perf_counter()
    for work in workloads(seed):
        if time.perf_counter() - start > seconds and len(nets) >= MIN_NETWORKS:
            break
        try:
            measured = Measurement(work, device)
            measured.take(overhead)
        except CANNOT_RUN as err:
            print(f"calibration: {left_out(work.label, err)}", file=sys.stderr)
            continue
        nets.append(measured)
        _tell(progress, (time.perf_counter() - start) / seconds * FIRST_ROUND, work.label)
    return nets


CANNOT_RUN = (RuntimeError, NotImplementedError)   # a layer this device's torch cannot run or trace (or no memory)


def left_out(label: str, err: Exception) -> str:
    """The line that names a network left out, and why (the error's first line)."""
    return f"left out {label}: {str(err).splitlines()[0][:60]}"   # within 100 columns with its label


def measure_round(nets: list[Measurement], overhead: float, done=None, progress=None) -> None:
    """One more round over the networks; `done()` (the share of the budget spent) stops it at 1."""
    for m in nets:
        if done is not None and done() >= 1:
            break
        m.take(overhead)
        _tell(progress, done() if done else 1.0, m.work.label)


def _tell(progress, fraction: float, label: str) -> None:
    if progress is not None:
        progress(min(fraction, 1.0), label)


def _fallback(ops: dict[str, list]) -> Roofline:
    """A roofline from the measured ops, for op names never measured: the best FLOP rate and byte rate seen (over
    ops that moved or computed enough to time it) and the median time of the cheapest ops."""
    timed = [(op, s) for samples in ops.values() for op, s in samples if s > RATE_MIN_S]
    flop_rates = [op.flops / s for op, s in timed if op.flops > 1e7]
    byte_rates = [op.nbytes / s for op, s in timed if op.nbytes > 1e6 and not op.flops]
    cheapest = sorted(s for samples in ops.values() for _, s in samples)[: max(1, sum(map(len, ops.values())) // 10)]
    return Roofline(_high(flop_rates), _high(byte_rates), statistics.median(cheapest))


def _high(rates: list[float]) -> float:
    """A rate the machine sustains at its best: the 90th percentile of those measured (the very best is often
    one op whose operands sat in cache)."""
    return float(np.percentile(rates, 90)) if rates else 1e9


def fit(nets: list[Measurement], machine: dict) -> Calibrated:
    """The predictors of devices/latency.py from the measurements."""
    ops: dict[str, list] = defaultdict(list)
    for m in nets:
        for op, seconds in m.samples():
            ops[op.name].append((op, seconds))
    steps = [(m.trace, m.fastest.best["step"]) for m in nets]
    fits = {name: fit_op([op for op, _ in samples], [s for _, s in samples], MAX_SAMPLES)
            for name, samples in ops.items()}
    partial = Calibrated(fits, dict.fromkeys(GROUPS, 1.0), 0.0, 0.0, 0.0, _fallback(ops), machine)
    rows, measured = [], []
    for trace, seconds in steps:
        groups = partial.group_seconds(trace.ops)
        rows.append([groups[g] for g in GROUPS] + [len(trace.ops), trace.tensors, trace.modules, 1.0])
        measured.append(seconds)
    coef = relative_nnls(np.array(rows), np.array(measured))
    scale = {g: (c if c > 0 else 1.0) for g, c in zip(GROUPS, coef)}   # a group no network ran: as measured alone
    per_op, per_tensor, per_module, fixed = coef[len(GROUPS):]
    return Calibrated(fits, scale, per_op, per_tensor, fixed, partial.fallback, machine, per_module_s=per_module)


def machine_record(device: str, threads: int, budget_s: float, nets: list[Measurement]) -> dict:
    """What was measured, for the device file: the processor (or GPU), threads, torch build, when, how many
    networks, and the median FLOP/s of their training steps (the FLOP clock's efficiency for this device)."""
    from testbed.provenance import cpu_name
    processor = torch.cuda.get_device_name() if device == "cuda" else cpu_name()
    return {"processor": processor, "device": device, "threads": threads, "torch": str(torch.__version__),
            "measured": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "budget_s": budget_s, "networks": len(nets), "rounds": min(m.fastest.rounds for m in nets),
            "training_flops_per_s": float(np.median([sum(op.flops for op in m.trace.ops) / m.fastest.best["step"]
                                                     for m in nets]))}


def calibrate(budget_s: float, device: str = "cpu", threads: int = 1, progress=None,
              seed: int = 0) -> Calibrated:
    """Measure this machine (its CPU at `threads` torch threads, or its GPU) and fit the latency predictors."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        nets = measure(budget_s, device, progress, seed)
        return fit(nets, machine_record(device, threads, budget_s, nets))
    finally:
        torch.set_num_threads(before)
