"""The latency clock (issue 43): a device's compute phase predicted from the operations its training steps run,
on a profile calibrated on the real device (`testbed calibrate`) or on a roofline of its catalog figures.

- trace.py: a training step's aten ops, traced on fake tensors; shrink.py: a structured submodel's dense network;
- calibration.py (+ networks.py, timing.py): measure this machine, fit devices/latency.py's predictors;
  device_file.py: write them as a catalog file;
- clock.py: the semantics of `compute: latency`, the cached step clock, and `step_time`.
The public calls are `testbed.calibrate` and `testbed.step_time` (below); torch is imported on their first use.
"""
from __future__ import annotations

from pathlib import Path

from testbed.errors import TestbedError

DEFAULT_BUDGET_S = 180.0


def step_time(model, sample, batch_size: int, profile, optimizer=None) -> float:
    """Predicted seconds of one training step of any torch `model` on a batch of `batch_size` inputs like
    `sample` (one input with its batch dimension), on `profile`: a built-in profile's name, a device file's path
    (what testbed calibrate wrote) or a DeviceProfile; `optimizer`: a local optimizer of testbed.local (default
    plain SGD). The number a `compute: latency` run charges for that step on a device of that profile."""
    from testbed.latency.clock import step_time as predicted
    try:
        return predicted(model, sample, batch_size, profile, optimizer)
    except ValueError as err:
        raise TestbedError(str(err)) from None


def calibrate(out, *, threads: int = 1, device: str = "cpu", budget: float = DEFAULT_BUDGET_S,
              name: str | None = None, quiet: bool = False) -> Path:
    """Measure this machine (its CPU at `threads` torch threads, or its GPU with device="cuda") for `budget`
    seconds, fit the latency clock's predictors and write them as a device file at `out` (a YAML catalog file of
    one profile, `name` or calibrated_<host>), with a progress bar unless `quiet`. Returns the file's path."""
    import socket

    import torch
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise TestbedError(f"--threads: {threads!r} is not a number of threads; give a whole number >= 1")
    if not isinstance(budget, (int, float)) or isinstance(budget, bool) or not 10 <= budget <= 24 * 3600:
        raise TestbedError(f"--budget: {budget!r} seconds; give between 10 and 86400 (default 180)")
    if device not in ("cpu", "cuda"):
        raise TestbedError(f"--device: {device!r}; choose cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise TestbedError("--device cuda: torch sees no CUDA device here; install a CUDA build of torch, or "
                           "calibrate the CPU with --device cpu")
    if Path(out).suffix.lower() not in (".yaml", ".yml"):
        raise TestbedError(f"--out {out}: a device file is YAML; name it .yaml")
    name = name or "calibrated_" + "".join(c if c.isalnum() or c in "_.-" else "_" for c in socket.gethostname())
    from testbed.latency.calibration import calibrate as measure
    from testbed.latency.device_file import write_device_file
    with _progress(budget, quiet) as tell:
        model = measure(float(budget), device, threads, tell)
    return write_device_file(out, model, name)


class _progress:
    """tqdm's bar over the budget, showing the network being measured."""

    def __init__(self, budget: float, quiet: bool):
        self.budget, self.quiet, self.bar = budget, quiet, None

    def __enter__(self):
        if self.quiet:
            return None
        from tqdm.auto import tqdm
        self.bar = tqdm(total=100, unit="%", bar_format="calibrating {bar} {n:.0f}% {desc}")
        return self.tell

    def tell(self, fraction: float, label: str) -> None:
        self.bar.n = round(100 * fraction)
        self.bar.set_description_str(label[:28], refresh=True)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.n = 100
            self.bar.close()
        return False
