"""The testbed against a bare PyTorch loop on one device (a GPU, or the CPU), workload by workload, in one process:

  W1       cnn_512, MNIST-5k, 100 devices Dirichlet(0.5), 10 a round, 1 epoch, batch 10 (benchmarks/w1.yaml)
  W-CIFAR  resnet20, synthetic CIFAR-10 (synthetic_cifar.py, read by the testbed's own loader), 100 devices x 500
           images (IID), 20 a round, 1 epoch, batch 32, lr 0.05, evaluation on the 10,000 test images every round
  W-paper  resnet18, the same data, 10 a round, 5 local epochs, batch 50

For each workload and precision (exact: IEEE float32, the testbed's exact_float32 flags; tf32; bf16 autocast):
  bare     bare_fedavg.py: nn.Module + torch.optim.SGD, one client after another, data on the device
  serial   the testbed, executor {kind: serial, device}
  batched  the testbed, executor {kind: batched, device} (vmap over the round's clients)
All train the devices of the scenario's selection (read back from the engine alone and checked against each
testbed run), from the registry model's same initial weights, in the same minibatch order, and evaluate on the
whole test set after every round. A testbed run in tf32 or bf16 sets executor.precision; a testbed that does not
accept it yet is reported and skipped, the bare loop still runs.

Marginal seconds a round: (T(R) - T(1)) / (R - 1) within one run of R rounds (round 1 pays start-up: cuDNN,
allocations, the FLOP count). Images a second: images trained a round (samples x epochs) over that. Training
FLOP/s: counted FLOPs (fvcore forward multiply-adds x 3 x 2 a sample) over the seconds in training (the
executor's train(), or the bare loop's SGD and averaging), as a fraction of torch.mm's float32 peak on the device;
'of peak (round)' divides by the whole round instead (evaluation included, its FLOPs not counted). The peak is
float32's on --threads torch threads (default 1), so bf16 and the CPU-core rows on more threads may read over 100%.

--budget-s counts from the start (the peak, writing and loading the data included). With N runs to go, a run
gets 1/N of what is left: it stops after the first round past that which gives it 2 rounds, an alarm cuts it
wherever it is at 2/N (a round that alone outlasts it reads "slower than that a round"), and a run whose 2 rounds
would not fit, by the workload's earlier runs, is skipped. Each result is a JSON line in OUT/gpu.jsonl, flushed
when it comes; the table and the issue's targets are printed and written to OUT/gpu.md at the end.
--cpu-cores adds W-CIFAR on the CPU (at --cpu-scale of the images): threads 1, threads = all cores, and
executor.workers = all cores at 1 thread each (skipped while the testbed does not accept it), tables compared.

    python benchmarks/gpu.py --device cuda [--workloads w1,wcifar,wpaper] [--rounds 5] [--modes serial,batched]
        [--precision exact,tf32,bf16] [--budget-s 480] [--out DIR] [--scale 1.0] [--cpu-cores] [--set KEY=VALUE]
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import torch

import gpu_report as report
from _harness import machine, warm_up_torch_func
from bare_fedavg import PRECISIONS, OutOfTime, fedavg
from gpu_work import WORKLOADS, build, flops_per_image, matmul_peak, planned_selection, run_testbed, scenario_dict
from testbed.execution.threads import DEFAULT_THREADS, torch_threads

MIN_ROUNDS = 2  # a marginal second a round needs two
SOFT_SHARES, HARD_SHARES = 1, 2  # a run's budget, in even shares of what is left: stop at a round's end, or at once


@contextmanager
def alarm(seconds: float):
    """OutOfTime raised in this (the main) thread after `seconds`, wherever the run is: a round that alone would
    outlast the budget (evaluation on the CPU, say) is cut, and the benchmark goes on to the next run."""
    def ring(signum, frame):
        raise OutOfTime

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cuda", "cpu"))
    parser.add_argument("--workloads", default="w1,wcifar,wpaper")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", default="serial,batched", help="testbed executors beside the bare loop")
    parser.add_argument("--precision", default="exact,tf32,bf16")
    parser.add_argument("--budget-s", type=float, default=480.0,
                        help="wall seconds from the start (after the imports) to the last run's end")
    parser.add_argument("--out", default=os.environ.get("OUT") or "gpu-results", help="folder of gpu.jsonl, gpu.md")
    parser.add_argument("--data", default=str(Path(tempfile.gettempdir()) / "testbed-gpu-bench"),
                        help="where the synthetic CIFAR-10 is written (once)")
    parser.add_argument("--scale", type=float, default=1.0, help="of the CIFAR images (50,000 + 10,000); W1 keeps its")
    parser.add_argument("--threads", type=int, default=None, help="torch threads of every run (executor.threads)")
    parser.add_argument("--eval-batch", type=int, default=None, help="the bare loop's (1000 on cuda, 100 on cpu)")
    parser.add_argument("--set", action="append", default=[],
                        help="KEY=VALUE for every testbed run (executor.* only where --modes all take it)")
    parser.add_argument("--cpu-cores", action="store_true", help="W-CIFAR on the CPU: 1 thread vs all cores")
    parser.add_argument("--cpu-scale", type=float, default=0.1, help="of the CIFAR images for --cpu-cores")
    parser.add_argument("--workers", default=None, help="executor.workers of the --cpu-cores row (all cores)")
    args = parser.parse_args(argv)
    args.workloads = args.workloads.split(",")
    args.modes = args.modes.split(",")
    args.precision = args.precision.split(",")
    for name, values, known in (("workloads", args.workloads, WORKLOADS), ("modes", args.modes, ("serial", "batched")),
                                ("precision", args.precision, PRECISIONS)):
        unknown = sorted(set(values) - set(known))
        if unknown:
            parser.error(f"--{name}: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    if args.rounds < MIN_ROUNDS:
        parser.error(f"--rounds: at least {MIN_ROUNDS} (seconds a round are T(R) - T(1))")
    return args


def plan(args) -> list[dict]:
    """The runs in the order they matter: exact precision for every workload first, then the fast modes;
    within a workload the bare loop first (every ratio needs it); the CPU-core rows last."""
    runs = []
    for precision in args.precision:
        for workload in args.workloads:
            runs.append({"workload": workload, "run": "bare", "precision": precision, "device": args.device,
                         "scale": args.scale, "threads": args.threads})
            for mode in args.modes:
                executor = {"kind": mode, "device": args.device}
                if args.threads:
                    executor["threads"] = args.threads
                if precision != "exact":  # the default: a testbed without the option still runs exact
                    executor["precision"] = precision
                runs.append({"workload": workload, "run": mode, "precision": precision, "device": args.device,
                             "scale": args.scale, "threads": args.threads, "executor": executor})
    if args.cpu_cores:
        cores = len(os.sched_getaffinity(0))
        workers = int(args.workers) if (args.workers or "").isdigit() else (args.workers or cores)  # N or auto
        for label, executor in (("serial, threads 1", {"threads": 1}), (f"serial, threads {cores}", {"threads": cores}),
                                (f"workers {workers}, threads 1", {"threads": 1, "workers": workers})):
            runs.append({"workload": "wcifar", "run": label, "precision": "exact", "device": "cpu", "cores": True,
                         "scale": args.cpu_scale, "threads": executor["threads"],
                         "executor": {"kind": "serial", "device": "cpu", **executor}})
    return runs


class Bench:
    """The state of one benchmark: the budget, the output file, what each workload needs for its bare loop."""

    def __init__(self, args, out: report.Output, began: float):
        self.args, self.out = args, out
        self.deadline = began + args.budget_s
        self.refs: dict[tuple, dict] = {}      # (workload, scale) -> reference experiment, selection, FLOPs
        self.rows: list[dict] = []

    def reference(self, spec: dict) -> dict:
        """The workload's data, initial weights, partition and planned selection (built once)."""
        key = (spec["workload"], spec["scale"])
        if key not in self.refs:
            sets = [s for s in self.args.set if not s.startswith("executor.")]  # another executor's options
            raw = scenario_dict(spec["workload"], Path(self.args.data), spec["scale"], self.args.rounds,
                                {"kind": "serial", "device": "cpu"}, sets)
            exp, why = build(raw)
            if exp is None:
                raise RuntimeError(f"the workload does not build: {why}")
            self.refs[key] = {"exp": exp, "selection": planned_selection(raw), "flops_per_image": flops_per_image(exp),
                              "initial": {k: v.detach().clone() for k, v in exp.model.state_dict().items()}}
        return self.refs[key]

    def limits(self, runs_left: int) -> tuple[float, object]:
        """A run's share of the budget: (seconds until it is cut wherever it is, the rule asked after each round:
        past SOFT_SHARES even shares of what is left, stop once it has MIN_ROUNDS rounds)."""
        now = time.perf_counter()
        share = max(0.0, self.deadline - now) / max(runs_left, 1)
        soft, hard = now + SOFT_SHARES * share, min(self.deadline, now + HARD_SHARES * share)

        def stop(timed) -> bool:
            return time.perf_counter() > soft and timed.rounds >= MIN_ROUNDS
        return hard - now, stop

    def would_not_fit(self, spec: dict) -> str | None:
        left = self.deadline - time.perf_counter()
        earlier = [r for r in self.rows if r.get("workload") == spec["workload"] and r.get("s_per_round")
                   and r.get("device") == spec["device"] and r.get("scale") == spec["scale"]]
        need = min((r["first_round_s"] + r["s_per_round"] for r in earlier), default=0.0)
        if left <= 0 or need > left:
            return f"would not fit: {left:.0f} s of the budget left, about {need:.0f} s for {MIN_ROUNDS} rounds"
        return None

    def run(self, spec: dict, runs_left: int) -> dict:
        row = {k: v for k, v in spec.items() if k != "executor"} | {"kind": "run"}
        why = self.would_not_fit(spec)
        if why:
            return row | {"status": "skipped", "note": why}
        ref = self.reference(spec)  # built once, outside every run's share
        seconds, stop = self.limits(runs_left)
        try:
            with alarm(seconds):
                return row | self._run(spec, ref, stop)
        except OutOfTime:  # while the testbed's run was being built
            return row | {"status": "stopped by the budget", "note": "cut before its first round"}

    def _run(self, spec: dict, ref: dict, stop) -> dict:
        row, device = {}, torch.device(spec["device"])
        if spec["run"] == "bare":
            exp, cfg = ref["exp"], ref["exp"].scenario
            eval_batch = self.args.eval_batch or (1000 if device.type == "cuda" else 100)
            with torch_threads(spec["threads"]):
                timed = fedavg(exp.model, ref["initial"], exp.dataset, exp.clients.train, ref["selection"], cfg.seed,
                               cfg.client.lr, cfg.client.batch_size, cfg.client.local_epochs, eval_batch, device,
                               spec["precision"], stop)
            row["eval_batch"] = eval_batch
        else:
            raw = scenario_dict(spec["workload"], Path(self.args.data), spec["scale"], self.args.rounds,
                                spec["executor"], self.args.set)
            exp, why = build(raw)
            if exp is None:
                return {"status": "skipped", "note": f"the installed testbed refuses it: {why}"}
            timed = run_testbed(exp, stop)
            planned = ref["selection"]
            row["selection_as_planned"] = all(planned.get(r) == d for r, d in timed.selection.items())
        if not timed.rounds:
            return {"status": "stopped by the budget", "note": "cut in round 1, after "
                    f"{time.perf_counter() - timed.start:.1f} s: slower than that a round"}
        return row | report.metrics(timed, ref["exp"], ref["flops_per_image"], self.out.peak)


def main(argv=None) -> int:
    began = time.perf_counter()  # the budget counts from here: the peak, data writing and loading are in it
    args = parse(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda, but torch sees no CUDA device here; use --device cpu", file=sys.stderr)
        return 2
    out = report.Output(Path(args.out))
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    out.emit({"kind": "machine", "machine": machine(), "gpu": gpu, "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "load_average": os.getloadavg()[0], "args": vars(args)})
    with torch_threads(args.threads):  # on the CPU the peak of the threads that the runs compute on
        out.peak, size = matmul_peak(device)
    out.emit({"kind": "peak", "device": args.device, "float32_flops": out.peak, "matrix": size,
              "threads": args.threads or DEFAULT_THREADS})
    out.emit({"kind": "note", "note": f"first torch.func call: {warm_up_torch_func():.2f} s (not timed)"})
    bench = Bench(args, out, began)
    runs = plan(args)
    out.emit({"kind": "note", "note": f"{len(runs)} runs planned, in this order: "
              + ", ".join(f"{r['workload']} {r['precision']} {r['run']}" for r in runs)})
    for i, spec in enumerate(runs):
        try:
            row = bench.run(spec, len(runs) - i)
        except Exception as err:  # noqa: BLE001 - one failing run (out of memory, say) must not lose the others
            row = {k: v for k, v in spec.items() if k != "executor"} | {
                "kind": "run", "status": "error", "note": f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"}
        if row["status"] == "error" and device.type == "cuda":
            torch.cuda.empty_cache()  # what the failed run held (its traceback is gone), for the runs after it
        report.compare(row, bench.rows)
        bench.rows.append(row)
        out.emit(row)
    with torch_threads(args.threads):  # again: on a shared machine a burst of load elsewhere spoils one measure
        again, size = matmul_peak(device)
    if again > out.peak:
        out.emit({"kind": "peak", "device": args.device, "float32_flops": again, "matrix": size, "again": True})
        report.rescale(bench.rows, out.peak, again)
        out.peak = again
    out.finish(bench.rows, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
