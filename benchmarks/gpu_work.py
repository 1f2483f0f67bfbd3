"""What benchmarks/gpu.py runs: the workloads as scenario dicts, the testbed's side of a run (timed round by
round, stoppable by a time budget), the devices each round trains, and the device's float32 matrix peak."""
from __future__ import annotations

import copy
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from _harness import HERE
from bare_fedavg import OutOfTime, Timed, _sync, exact_float32
from scale import ZeroExecutor
from synthetic_cifar import write_synthetic_cifar10
from testbed import scenario as sc
from testbed.engine import Engine
from testbed.errors import TestbedError
from testbed.execution.threads import torch_threads
from testbed.flops import FLOPS_PER_MULTIPLY_ADD, forward_flops_per_sample, training_flops

FLEET = {"groups": [{"profile": "jetson_xavier_nx", "count": 100}]}   # always on: every selected device arrives


def _cifar(name: str, model: str, per_round: int, epochs: int, batch: int) -> dict:
    return {"name": name, "seed": 0, "description": f"benchmarks/gpu.py: {model} on synthetic CIFAR-10",
            "data": {"name": "cifar10", "partition": {"kind": "iid"}}, "model": {"name": model}, "fleet": FLEET,
            "round": {"clients_per_round": per_round, "overcommit": 1.0},
            "client": {"lr": 0.05, "local_epochs": epochs, "batch_size": batch}, "algorithm": {"name": "fedavg"},
            "eval": {"every_rounds": 1}}


# name -> (label, scenario without data.root / stop / executor, whether it reads the synthetic CIFAR-10)
WORKLOADS = {
    "w1": ("W1: cnn_512, MNIST-5k, 10 a round, batch 10", sc.read_yaml(HERE / "w1.yaml"), False),
    "wcifar": ("W-CIFAR: resnet20, 100 x 500 images, 20 a round, batch 32",
               _cifar("w_cifar", "resnet20", 20, 1, 32), True),
    "wpaper": ("W-paper: resnet18, 100 x 500 images, 10 a round, 5 epochs, batch 50",
               _cifar("w_paper", "resnet18", 10, 5, 50), True),
}


def scenario_dict(workload: str, data_dir: Path, scale: float, rounds: int, executor: dict,
                  sets: list[str] = ()) -> dict:
    """The workload's scenario for `rounds` rounds under `executor`; `sets` are `--set` overrides (key=value)."""
    raw = copy.deepcopy(WORKLOADS[workload][1])
    if WORKLOADS[workload][2]:
        raw["data"]["root"] = str(write_synthetic_cifar10(data_dir / f"scale-{scale:g}", scale))
    raw["stop"] = {"max_rounds": rounds}
    raw["executor"] = dict(executor)
    return sc.apply_overrides(raw, list(sets))


def build(raw: dict):
    """(Experiment, None), or (None, why): a scenario the installed testbed refuses (an executor option not
    written yet, say) is reported, not raised. Data loading happens here, outside every stopwatch."""
    try:
        return sc.build(sc.validate(raw, "benchmarks/gpu.py", HERE)), None
    except TestbedError as err:
        return None, " ".join(str(err).split())


class _Stopwatch:
    """Delegates to the executor and records the seconds of each train() call; on a GPU it waits for the
    device before it stops the clock, so that the work train() queued counts in train()."""

    def __init__(self, inner, device: torch.device):
        self.inner, self.device, self.calls = inner, device, []

    def train(self, strategy, jobs):
        began = time.perf_counter()
        try:
            return self.inner.train(strategy, jobs)
        finally:
            _sync(self.device)
            self.calls.append((began, time.perf_counter()))

    def __getattr__(self, name):
        return getattr(self.inner, name)


def run_testbed(exp, stop=lambda timed: False) -> Timed:
    """Engine(...) + run() on the run's torch threads (executor.threads, as the runner sets them), timed round by
    round; `stop(timed)` after each round ends the run early, as does OutOfTime raised from anywhere within (an
    alarm in the middle of a round). Training seconds: the executor's train() calls."""
    device = torch.device(exp.scenario.executor.device)
    watch = _Stopwatch(exp.executor, device)
    exp.executor = watch
    last = exp.scenario.stop.max_rounds

    def on_round(record: dict, events: list[dict]) -> None:
        timed.round_ends.append(time.perf_counter())
        timed.accuracies.append(record["accuracy"])
        timed.losses.append(record["loss"])
        timed.selection[record["round"]] = sorted({e["device"] for e in events if e["outcome"] == "done"})
        done = [b - a for a, b in watch.calls if a >= (timed.round_ends[-2] if timed.rounds > 1 else timed.start)]
        timed.train_seconds.append(sum(done))
        if record["round"] < last and stop(timed):
            raise OutOfTime

    with torch_threads(exp.scenario.executor.threads):
        timed = Timed(time.perf_counter())
        try:
            Engine(exp, on_round).run()
        except OutOfTime:
            timed.stopped_early = True
            watch.inner.close()  # the engine closes it only at the end of its run
    return timed


def planned_selection(raw: dict) -> dict[int, list[int]] | None:
    """Round -> devices that the scenario trains, from the engine alone (scale.py's ZeroExecutor, evaluation on
    one sample): with uniform selection, an always-on fleet and no deadline it does not depend on training. The
    testbed runs are checked against it. None if the scenario does not build."""
    raw = sc.apply_overrides(raw, ["executor.kind=serial", "executor.device=cpu", "eval.max_samples=1"])
    raw["executor"] = {k: v for k, v in raw["executor"].items() if k in ("kind", "device", "threads")}
    exp, _ = build(raw)
    if exp is None:
        return None
    exp.executor = ZeroExecutor()
    selection: dict[int, list[int]] = {}
    Engine(exp, lambda record, events: selection.__setitem__(
        record["round"], sorted({e["device"] for e in events if e["outcome"] == "done"}))).run()
    return selection


def flops_per_image(exp) -> float:
    """Counted training FLOPs of one image: fvcore's forward multiply-adds x 3 (forward + backward) x 2."""
    example = exp.dataset.train_x[:1]
    return FLOPS_PER_MULTIPLY_ADD * training_flops(forward_flops_per_sample(exp.model, example), 1)


def matmul_peak(device: torch.device, budget_s: float = 3.0) -> tuple[float, int]:
    """(best FLOP/s, at which size) of torch.mm on float32 square matrices under the exact-float32 flags (no
    TF32), 2 n^3 FLOPs each; sizes in turn until the budget is spent, the best run kept."""
    sizes = (4096, 8192) if device.type == "cuda" else (1024, 2048)
    pairs = {n: (torch.randn(n, n, device=device), torch.randn(n, n, device=device)) for n in sizes}
    best, best_n = 0.0, 0
    with exact_float32(device) if device.type == "cuda" else nullcontext():
        for a, b in pairs.values():
            torch.mm(a, b)  # first call: allocation, kernel selection
        began = time.perf_counter()
        while time.perf_counter() - began < budget_s:
            for n, (a, b) in pairs.items():
                _sync(device)
                start = time.perf_counter()
                torch.mm(a, b)
                _sync(device)
                best, best_n = max((best, best_n), (2 * n**3 / (time.perf_counter() - start), n))
    return best, best_n
