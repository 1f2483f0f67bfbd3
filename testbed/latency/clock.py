"""The latency clock (a scenario's `compute: latency`): a device's compute phase is the predicted time of the steps
it runs, on its profile's predictor, instead of its counted FLOPs over one FLOP/s.

Exact semantics:
- A task's compute seconds = sum over its minibatches of step_seconds(network, batch size, predictor) / z, where
  the minibatches are its local optimizer's schedule (LocalSchedule.batch_sizes: the full batches and each
  epoch's last short one), and z is the device's capability that round (fleet tiers; 1 without): a tier divides
  the whole step time, as it divides the FLOP/s on the FLOP clock. Fluctuating speed (devices/rates.py) scales
  it over time as it scales FLOP/s.
- step_seconds is devices/latency.py's prediction for the ops of trace.py's step: the forward pass, the
  cross-entropy loss, the backward pass and the update of the strategy's own local optimizer (its `client`); a
  strategy's own objective terms (FedProx's proximal term, FedLPS's scores and masks) are not traced.
- The network a device runs is what it holds: a task whose downlink is a submodel payload (UnitMasked: HeteroFL,
  FjORD, FedRolex, eFD, FedMP, FedAP's and HRank's pruned models) runs that shrunk dense network (shrink.py), timed
  at its own shapes; a device that receives the whole model and masks it (FedLPS, IMC's unstructured masks) runs
  the dense shape, since no smaller dense network exists (a masked FedLPS unit still feeds its bias forward) and
  a runtime without sparse kernels computes every entry.
- Sparse kernels: a profile with `sparse_efficiency` e (in (0, 1]; none by default) runs such a masked task (the
  whole model sent, its Task.forward_flops below the model's) at min(dense, dense x s / e) seconds, s the task's
  counted forward FLOPs over the model's (its kept share, as the FLOP clock counts it): every op of the step is
  taken to shrink with the kept FLOPs at e times the dense rate (e = 1: the best a sparse runtime could do), and
  a runtime whose sparse kernels are slower than its dense ones runs dense.
- The predictor of a device is its profile's calibration where it has one (`testbed calibrate`), else the
  roofline of its figures (peak_flops x efficiency, memory_Bps, call_overhead_s).
- Only the clock changes: bytes, counted FLOPs (rounds.csv's `flops`) and the algorithms' own cost estimates
  (P-UCBV's local cost, Oort's durations, FedCS's deadline planning) are what the algorithm can know, as before.
  Energy is power x phase time, so it follows the predicted time.
- A profile calibrated on a GPU (`testbed calibrate --device cuda`) has its steps traced on this host's GPU, so
  they dispatch the ops its calibration timed (cuDNN's); on a host without one they are traced on the CPU, said once
  per profile on stderr, and an op timed there under the GPU's name for the same layer is predicted by that
  (devices/latency.py's SAME_WORK: batch norm, an LSTM, attention).
- An op the calibration never measured is charged by the calibration's fallback roofline, reported once per op
  name and profile on stderr.
Predictions are cached per (profile, network shape, batch size); a network is traced at two batch sizes and its
step at any other is interpolated from them (trace.at_batch), so the devices' many short last batches cost no
trace each.
"""
from __future__ import annotations

import copy
import math
import sys
from collections import Counter
from pathlib import Path

import torch

from devices.latency import Calibrated, Roofline
from devices.profiles import DeviceProfile
from testbed.flops import FLOPS_PER_MULTIPLY_ADD
from testbed.latency.shrink import shape_key, shrunk
from testbed.latency.trace import at_batch, trace_step

FULL = ((), ())   # the shape key of the model itself


def predictor_of(profile: DeviceProfile) -> Calibrated | Roofline:
    """A profile's latency predictor: its calibration, else the roofline of its figures."""
    if profile.latency is not None:
        return profile.latency
    missing = profile.missing_roofline
    if missing:
        raise ValueError(f"profile {profile.name} has no {missing[0]} for compute: latency; give it "
                         f"{' and '.join(missing)} (with their sources) in its catalog file, or calibrate the device "
                         "with testbed calibrate")
    return Roofline(profile.peak_flops * profile.efficiency, profile.memory_Bps, profile.call_overhead_s)


def profile_named(profile: str | Path | DeviceProfile) -> DeviceProfile:
    """A profile from a built-in catalog name or a device file's path (its first profile)."""
    if isinstance(profile, DeviceProfile):
        return profile
    from devices.catalog import CATALOG
    if isinstance(profile, str) and profile in CATALOG:
        return CATALOG[profile]
    path = Path(profile)
    if not path.exists():
        raise ValueError(f"profile {str(profile)!r} is neither a built-in profile ({', '.join(CATALOG)}) nor a "
                         "device file; give a catalog name or the path of a file testbed calibrate wrote")
    from devices.catalog_file import load_device_catalog
    return next(iter(load_device_catalog(path).profiles.values()))


def calibration_of(profile) -> Calibrated | Roofline:
    return predictor_of(profile_named(profile))


class StepClock:
    """Predicted step and task seconds of one model (and its shrunk networks) on any profile, cached."""

    def __init__(self, model: torch.nn.Module, sample: torch.Tensor, optimizer=None, report=None):
        self.model, self.sample, self.optimizer = model, sample[:1], optimizer
        self._networks: dict[tuple, torch.nn.Module] = {FULL: model}
        self._on_gpu: dict[tuple, torch.nn.Module] = {}   # (key, device) -> a network's copy there
        self._traces: dict[tuple, object] = {}
        self._traced: dict[tuple, set[int]] = {}   # the batch sizes really traced, per (network, device)
        self._seconds: dict[tuple, float] = {}
        self._reported: set[tuple[str, str]] = set()   # (profile, what) said once
        self._report = report or (lambda line: print(line, file=sys.stderr))

    def network_of(self, down) -> tuple:
        """The shape key of the network a task runs, from the codec it receives (module docstring)."""
        rows, columns = getattr(down, "masks", None), getattr(down, "columns", None)
        if not rows and not columns or not hasattr(down, "columns"):
            return FULL
        key = shape_key(rows, columns)
        if key not in self._networks:
            self._networks[key] = shrunk(self.model, rows, columns)
        return key

    def trace(self, key: tuple, batch_size: int, device: str = "cpu"):
        """The network's step at this batch size on `device`: traced at two sizes, every other one interpolated
        from them (trace.at_batch: a step's FLOPs, bytes and operand dims are affine in the batch size), or traced
        where the two do not dispatch the same ops; a batch of one is always traced (a tensor with a dimension of
        1 is contiguous either way, so some copies are not made: char_lstm dispatches other ops there)."""
        traced = (key, device)
        if (traced, batch_size) not in self._traces:
            known = sorted(b for b in self._traced.get(traced, ()) if b > 1)
            step = at_batch(self._traces[traced, known[0]], known[0], self._traces[traced, known[-1]], known[-1],
                            batch_size) if len(known) >= 2 and batch_size > 1 else None
            if step is None:
                step = trace_step(self._network_on(key, device), self.sample, batch_size, self.optimizer)
                self._traced.setdefault(traced, set()).add(batch_size)
            self._traces[traced, batch_size] = step
        return self._traces[traced, batch_size]

    def _network_on(self, key: tuple, device: str) -> torch.nn.Module:
        if device == "cpu":
            return self._networks[key]
        if (key, device) not in self._on_gpu:
            self._on_gpu[key, device] = copy.deepcopy(self._networks[key]).to(device)
        return self._on_gpu[key, device]

    def device_of(self, profile: DeviceProfile) -> str:
        """Where the profile's steps are traced (module docstring): its calibration's GPU where this host has one."""
        machine = getattr(profile.latency, "machine", None) or {}
        if machine.get("device", "cpu") == "cpu":
            return "cpu"
        if torch.cuda.is_available():
            return "cuda"
        self._once(profile, "no GPU", f"latency clock: {profile.name}: a GPU calibration; no GPU here, steps "
                   "traced on the CPU")   # docs/latency.md says what that charges
        return "cpu"

    def step_seconds(self, profile: DeviceProfile, batch_size: int, key: tuple = FULL) -> float:
        cache = (profile.name, id(profile), key, batch_size)
        if cache not in self._seconds:
            trace = self.trace(key, batch_size, self.device_of(profile))
            seconds, unknown = predictor_of(profile).step_seconds(trace)
            for name, count in unknown.items():
                self._tell(profile, name, count)
            self._seconds[cache] = seconds
        return self._seconds[cache]

    def task_seconds(self, profile: DeviceProfile, batch_sizes: list[int], key: tuple = FULL) -> float:
        """The steps of one task: each distinct batch size's step time x how many there are."""
        return math.fsum(count * self.step_seconds(profile, b, key) for b, count in sorted(Counter(batch_sizes).items()))

    def _tell(self, profile: DeviceProfile, op: str, count: int) -> None:
        fallback = profile.latency.fallback
        # three short lines, not one of 150 columns (an op name runs to 50 characters)
        self._once(profile, op, f"latency clock: aten.{op} ({count} a step)\n  was never measured in {profile.name}'s "
                   f"calibration;\n  charged by its roofline ({fallback.flops_per_s / 1e9:.3g} GFLOP/s, "
                   f"{fallback.memory_Bps / 1e9:.3g} GB/s, {fallback.call_overhead_s * 1e6:.3g} us a call)")

    def _once(self, profile: DeviceProfile, what: str, line: str) -> None:
        """Report `line` the first time `what` is said of this profile."""
        if (profile.name, what) not in self._reported:
            self._reported.add((profile.name, what))
            self._report(line)


class FleetLatency:
    """compute: latency for one run: each task's compute seconds on its device's profile (its group's, overrides
    included), given to the planner as the FLOP/s at which the task's counted FLOPs take that long."""

    def __init__(self, exp, forward_flops: int):
        strategy = exp.strategy
        self.client = getattr(strategy, "client", None)
        if not hasattr(self.client, "batch_sizes"):   # a strategy without a local optimizer of ours: the scenario's
            from testbed.local import LocalSGD
            self.client = LocalSGD(**exp.scenario.client.model_dump())
        self.steps = StepClock(exp.model, exp.dataset.train_x[:1], self.client)
        self.forward_flops = forward_flops   # a sample's forward multiply-adds through the dense model
        self.profiles = [g.profile for g in exp.fleet.groups]
        self.group = exp.fleet.group
        self.nominal = exp.fleet.peak_flops * exp.fleet.efficiency
        self._seconds: dict[tuple, float] = {}

    def seconds(self, task) -> float:
        """The task's compute seconds at its device's full capability."""
        key = (int(self.group[task.device]), self.steps.network_of(task.down), task.num_samples)
        if key not in self._seconds:
            self._seconds[key] = self.steps.task_seconds(self.profiles[key[0]], self.client.batch_sizes(key[2]),
                                                         key[1])
        return sparse_seconds(self._seconds[key], self.profiles[key[0]].sparse_efficiency,
                              task.forward_flops if key[1] == FULL else None, self.forward_flops)

    def capacity(self, task, flops: int, capacity_flops_per_s: float) -> float:
        """The FLOP/s at which `flops` take the task's predicted seconds at this round's capability (the tier:
        capacity over the device's nominal FLOP/s)."""
        tier = capacity_flops_per_s / float(self.nominal[task.device])
        return FLOPS_PER_MULTIPLY_ADD * flops * tier / self.seconds(task)


def sparse_seconds(dense_s: float, efficiency: float | None, kept_flops: int | None, model_flops: int) -> float:
    """A masked task's seconds on sparse kernels (the module's docstring): dense_s where the device has none or
    the task is not masked."""
    if efficiency is None or kept_flops is None or kept_flops >= model_flops:
        return dense_s
    return min(dense_s, dense_s * (kept_flops / model_flops) / efficiency)


def step_time(model: torch.nn.Module, sample: torch.Tensor, batch_size: int, profile, optimizer=None) -> float:
    """Predicted seconds of one training step of `model` on a batch of `batch_size` inputs like `sample` (one
    input with its batch dimension), on `profile` (a built-in profile's name, a device file's path or a
    DeviceProfile): the number a `compute: latency` run charges for that step (before a capability tier)."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    return StepClock(model, sample, optimizer).step_seconds(profile_named(profile), batch_size)
