"""What the benchmarks share: build a scenario (or say that its executor does not exist yet), run it through
the engine with a stopwatch, read back who trained in each round, and describe the machine."""
from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from testbed import scenario as sc
from testbed.engine import Engine
from testbed.errors import TestbedError
from testbed.provenance import cpu_name

HERE = Path(__file__).resolve().parent


@dataclass
class TestbedRun:
    seconds: float                     # Engine(...) + run(): FLOP counting, every round, every evaluation
    setup_seconds: float               # of which Engine(...) (fvcore FLOP count of the model)
    train_seconds: float               # of which inside executor.train (real local training)
    records: list[dict] = field(default_factory=list)
    selection: dict[int, list[int]] = field(default_factory=dict)   # round -> devices trained, ascending
    round_ends: list[float] = field(default_factory=list)           # perf_counter at the end of each round

    @property
    def after_first_round(self) -> float:
        """Seconds from the end of round 1 to the end of the last round (no start-up costs)."""
        return self.round_ends[-1] - self.round_ends[0]

    @property
    def accuracies(self) -> list[float]:
        return [r["accuracy"] for r in self.records]

    @property
    def final_accuracy(self) -> float:
        return self.records[-1]["accuracy"]


def _timed_train(executor, run: TestbedRun):
    """The executor's own train(), adding its seconds to the run. The executor object stays what it is (a pool
    of worker processes is asked for evaluation's logits too: a wrapper would hide it)."""
    train = executor.train

    def timed(strategy, jobs):
        start = time.perf_counter()
        try:
            return train(strategy, jobs)
        finally:
            run.train_seconds += time.perf_counter() - start

    return timed


def build(path: str | Path, overrides: list[str] = ()):
    """(Experiment, None), or (None, why) when the scenario does not validate, e.g. an executor not written
    yet. Data loading and partitioning happen here, outside every stopwatch."""
    try:
        return sc.build(sc.load(path, list(overrides))), None
    except TestbedError as err:
        return None, str(err)


def run_testbed(exp) -> TestbedRun:
    """Run `exp` through the engine; time the whole of it and, separately, the executor's training."""
    run = TestbedRun(0.0, 0.0, 0.0)
    exp.executor.train = _timed_train(exp.executor, run)   # on the instance: its class's train() is untouched

    def on_round(record: dict, events: list[dict]) -> None:
        run.round_ends.append(time.perf_counter())
        run.records.append(record)
        run.selection[record["round"]] = sorted({e["device"] for e in events if e["outcome"] == "done"})

    try:
        start = time.perf_counter()
        engine = Engine(exp, on_round)
        run.setup_seconds = time.perf_counter() - start
        engine.run()
        run.seconds = time.perf_counter() - start
    finally:
        del exp.executor.train   # the class's own again
    return run


def warm_up(model: torch.nn.Module, sample_shape=(1, 28, 28), batch_size: int = 10, eval_batch: int = 100) -> None:
    """Forward and backward passes at every minibatch size up to `batch_size`, and one evaluation pass, so
    that no stopwatch pays for the first call into torch's kernels at a shape (whichever run comes first
    would pay it otherwise)."""
    for b in range(1, batch_size + 1):
        model.zero_grad()
        model(torch.randn(b, *sample_shape)).sum().backward()
    with torch.no_grad():
        model(torch.randn(eval_batch, *sample_shape))


def warm_up_torch_func() -> float:
    """The first torch.func call in a process imports much of torch's compiler stack (sympy, mpmath, about 800
    modules): about a second, once per process, like `import torch`. Paid here, outside every stopwatch;
    returns the seconds, which the scripts print."""
    from torch.func import functional_call, grad_and_value, vmap

    model = torch.nn.Linear(3, 2)
    params = {n: p.detach() for n, p in model.named_parameters()}

    def loss(p, x):
        return functional_call(model, p, (x,)).square().sum()

    start = time.perf_counter()
    grad_and_value(loss)(params, torch.randn(4, 3))
    vmap(grad_and_value(loss))({n: v.expand(2, *v.shape) for n, v in params.items()}, torch.randn(2, 4, 3))
    return time.perf_counter() - start


def machine() -> str:
    cpu = cpu_name()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"{cpu}, {cores} cores, torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"numpy {np.__version__}, Python {platform.python_version()}")


def ratio(a: float | None, b: float | None) -> str:
    return "n/a" if not a or not b else f"{a / b:.2f}x"


def seconds(value: float | None) -> str:
    return "not run" if value is None else f"{value:.2f}"
