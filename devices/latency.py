"""Predicted seconds of a training step from its ops (trace.py): a roofline from a profile's figures, or the
per-op predictors a calibration fitted on the machine (calibration.py).

Roofline (a profile without a calibration): each op costs its per-call overhead plus the longer of its FLOPs at
the profile's training rate (peak x efficiency) and its bytes at the memory bandwidth:
    t_op = call_overhead_s + max(flops / (peak_flops * efficiency), nbytes / memory_Bps),   t_step = sum of t_op.

Calibrated (nn-Meter's shape: a predictor per kind, fitted on measured samples; here a kind is an aten op name):
    base(op)    = c0 + c1 * flops + c2 * nbytes   (non-negative least squares on relative error, per op name)
    t_op        = base(op) * exp(weighted mean of log(measured / base) over the op's K_NEAREST calibrated samples,
                  nearest in trace.Op.features(), weights 1 / (distance + DISTANCE_FLOOR))
    t_step      = sum over groups g of scale_g * (sum of t_op over the step's ops in g) + per_op_s * (ops)
                  + per_tensor_s * (parameter tensors) + per_module_s * (module calls) + fixed_s
The kNN factor carries what the roofline cannot (a convolution's efficiency at 1 input channel against 64); far
from every sample it is the mean ratio of the nearest ones, never an extrapolated trend. The step terms carry what
timing ops one by one misses, fitted on whole steps of the calibration's networks: an op replayed alone finds its
operands in cache, inside a step it often does not (scale_g, per group of ops: GROUPS, group_of), and the autograd
engine and Python run between ops (per_op_s), over the parameter tensors (per_tensor_s: the functional call and the
optimizer's loop), in each module the forward calls (per_module_s: nn.Module's call and the layer's Python around
its ops; without it a logistic regression's 2 modules were charged the fixed cost of calibration's networks of 4 to
15, 1.2x) and around the step (fixed_s). A file of format testbed-latency/1 was fitted without per_module_s: it
reads as 0, its predictions as they were.
An op name the calibration never measured is charged by its twin's predictor where the calibration measured that
(SAME_WORK: the same layer's op under another device's name), a grouped convolution's (trace.py names it apart) by
the dense convolution's, else by the calibrated `fallback` roofline, and named in `unknown` (the clock reports each
once).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from typing import Protocol

import numpy as np



class Op(Protocol):
    """What a prediction reads of an op (testbed/latency/trace.py's Op)."""

    name: str
    flops: int
    nbytes: int

    def features(self) -> tuple[float, ...]: ...


GROUPS = ("conv", "matmul", "recurrent", "norm", "pool", "memory", "small")
LARGE_BYTES = 1 << 20    # an op moving this many bytes or more is memory-bound in a step: group "memory"


def group_of(op: Op) -> str:
    """The group whose in-step scale an op takes."""
    name = op.name
    if "conv" in name:
        return "conv"
    if name in ("mm", "addmm", "bmm", "baddbmm"):
        return "matmul"
    if "rnn" in name or "lstm" in name or "gru" in name:
        return "recurrent"
    if "norm" in name:
        return "norm"
    if "pool" in name:
        return "pool"
    return "memory" if op.nbytes >= LARGE_BYTES else "small"


class Step(Protocol):
    """What a prediction reads of a step (testbed/latency/trace.py's Step)."""

    ops: tuple
    tensors: int
    modules: int


# One layer's work under a CPU's and a GPU's op names, with the same first two operands (trace.Op's features): a
# profile calibrated on one device predicts a step traced on the other (a Jetson's file on a laptop without its GPU).
# A GPU's LSTM runs all its layers in one _cudnn_rnn; the CPU's mkldnn_rnn_layer runs one: each is priced per call.
_TWINS = (("native_batch_norm", "cudnn_batch_norm"), ("native_batch_norm_backward", "cudnn_batch_norm_backward"),
          ("mkldnn_rnn_layer", "_cudnn_rnn"), ("mkldnn_rnn_layer_backward", "_cudnn_rnn_backward"),
          ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention"),
          ("_scaled_dot_product_flash_attention_for_cpu_backward", "_scaled_dot_product_efficient_attention_backward"))
SAME_WORK = {a: b for a, b in _TWINS} | {b: a for a, b in _TWINS}

# a grouped (depthwise) convolution's op names end with this (trace.py): another kernel, at another rate
GROUPED = "_grouped"

K_NEAREST = 4
DISTANCE_FLOOR = 0.25


@dataclass(frozen=True)
class Roofline:
    """Per-call overhead plus the longer of compute and memory time, per op."""

    flops_per_s: float     # two per multiply-add
    memory_Bps: float
    call_overhead_s: float

    def op_seconds(self, op: Op) -> float:
        return self.call_overhead_s + max(op.flops / self.flops_per_s, op.nbytes / self.memory_Bps)

    def step_seconds(self, step: Step) -> tuple[float, dict[str, int]]:
        """The step's seconds, and the op names charged by a fallback (none: a roofline knows every op)."""
        return math.fsum(self.op_seconds(op) for op in step.ops), {}


@dataclass(frozen=True)
class OpFit:
    """One op name's predictor: its base line and its samples' (features, log of measured / base)."""

    base: tuple[float, float, float]                 # c0 (s), c1 (s per FLOP), c2 (s per byte)
    samples: tuple[tuple[tuple[float, ...], float], ...]

    def base_seconds(self, op: Op) -> float:
        c0, c1, c2 = self.base
        return c0 + c1 * op.flops + c2 * op.nbytes

    def seconds(self, op: Op) -> float:
        base = self.base_seconds(op)
        if not self.samples:
            return base
        points = np.array([f for f, _ in self.samples])
        ratios = np.array([r for _, r in self.samples])
        distance = np.sqrt(((points - np.array(op.features())) ** 2).sum(axis=1))
        nearest = np.argsort(distance, kind="stable")[:K_NEAREST]
        weights = 1.0 / (distance[nearest] + DISTANCE_FLOOR)
        return base * math.exp(float((weights * ratios[nearest]).sum() / weights.sum()))


@dataclass(frozen=True)
class Calibrated:
    """The predictors a calibration fitted (module docstring), and the step terms."""

    ops: dict[str, OpFit]
    scale: dict[str, float]     # group -> in-step scale (GROUPS)
    per_op_s: float
    per_tensor_s: float
    fixed_s: float
    fallback: Roofline
    machine: dict | None = None   # what was measured, and when (calibration.py's record)
    per_module_s: float = 0.0     # a testbed-latency/1 file's (fitted before the term)

    def __hash__(self):   # a profile holding it stays hashable; two calibrations are rarely compared
        return id(self)

    def fit_of(self, name: str) -> OpFit | None:
        """The op name's predictor, or its twin's (SAME_WORK), or for a grouped convolution the dense one's (a
        calibration that measured none, as files written before grouped names were); None where none was."""
        fit = self.ops.get(name) or self.ops.get(SAME_WORK.get(name, ""))
        if fit is None and name.endswith(GROUPED):
            return self.fit_of(name.removesuffix(GROUPED))
        return fit

    def op_seconds(self, op: Op) -> float:
        fit = self.fit_of(op.name)
        return self.fallback.op_seconds(op) if fit is None else fit.seconds(op)

    def group_seconds(self, ops) -> dict[str, float]:
        """The ops' predicted seconds (alone), summed per group."""
        total = dict.fromkeys(GROUPS, 0.0)
        for op in ops:
            total[group_of(op)] += self.op_seconds(op)
        return total

    def step_seconds(self, step: Step) -> tuple[float, dict[str, int]]:
        """The step's seconds, and the op names charged by the fallback roofline (with their counts)."""
        unknown: dict[str, int] = {}
        for op in step.ops:
            if self.fit_of(op.name) is None:
                unknown[op.name] = unknown.get(op.name, 0) + 1
        groups = self.group_seconds(step.ops)
        in_step = math.fsum(self.scale[g] * groups[g] for g in GROUPS)
        return (in_step + self.per_op_s * len(step.ops) + self.per_tensor_s * step.tensors
                + self.per_module_s * step.modules + self.fixed_s), unknown


def relative_nnls(rows: np.ndarray, seconds: np.ndarray) -> list[float]:
    """Non-negative terms of rows @ terms = seconds, least squares on relative error (each sample weighs alike)."""
    from scipy.optimize import nnls
    design = rows / seconds[:, None]
    largest = np.abs(design).max(axis=0)
    scales = np.where(largest > 0, largest, 1.0)   # columns of like size, so nnls converges
    coef, _ = nnls(design / scales, np.ones_like(seconds))
    return [float(c) for c in coef / scales]


def fit_base(flops: np.ndarray, nbytes: np.ndarray, seconds: np.ndarray) -> tuple[float, float, float]:
    """c0 + c1 flops + c2 bytes, terms >= 0 (relative_nnls)."""
    return tuple(relative_nnls(np.stack([np.ones_like(seconds), flops, nbytes], axis=1), seconds))


def fit_op(ops: list, seconds: list[float], most: int) -> OpFit:
    """An op name's predictor from its measured samples (trace.Op, seconds): the base line on all of them; for
    the nearest-neighbour factor, samples at distinct features (the median where one was measured several times),
    at most `most`, evenly spread over them in feature order."""
    t = np.array(seconds)
    base = fit_base(np.array([o.flops for o in ops], float), np.array([o.nbytes for o in ops], float), t)
    fit = OpFit(base, ())
    by_point: dict[tuple, list[float]] = {}
    for o, s in zip(ops, seconds):
        point = tuple(round(f, 2) for f in o.features())
        by_point.setdefault(point, []).append(math.log(s / max(fit.base_seconds(o), 1e-12)))
    points = sorted(by_point)
    if len(points) > most:
        points = [points[i] for i in np.linspace(0, len(points) - 1, most).round().astype(int)]
    return OpFit(base, tuple((p, round(float(np.median(by_point[p])), 4)) for p in points))


# ---- the `latency:` mapping of a device file (devices/catalog_file.py) ----------------------------------------
FORMAT = "testbed-latency/2"
STEP_TERMS = ("per_op_s", "per_tensor_s", "per_module_s", "fixed_s")
OLDER = {"testbed-latency/1": ("per_module_s",)}   # a format this one reads, and the step terms it lacks (0 there)
ROOFLINE_TERMS = ("flops_per_s", "memory_Bps", "call_overhead_s")


def calibration_to_dict(model: Calibrated) -> dict:
    """What a device file holds of a calibration (read back by calibration_from_dict)."""
    return {"format": FORMAT, "machine": dict(model.machine or {}),
            "step": {"scale": {g: float(model.scale[g]) for g in GROUPS}}
            | {term: float(getattr(model, term)) for term in STEP_TERMS},
            "fallback": {term: float(getattr(model.fallback, term)) for term in ROOFLINE_TERMS},
            "ops": {name: {"base": [float(c) for c in fit.base],
                           "samples": [list(features) + [ratio] for features, ratio in fit.samples]}
                    for name, fit in sorted(model.ops.items())}}


def _terms(where: str, section: dict, names: tuple[str, ...], positive: tuple[str, ...] = ()) -> dict[str, float]:
    if not isinstance(section, dict):
        raise ValueError(f"{where}: a mapping of {', '.join(names)}")
    out = {}
    for name in names:
        value = section.get(name)
        if value is None:
            raise ValueError(f"{where}.{name}: required; re-run testbed calibrate")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 \
                or (name in positive and value == 0):
            raise ValueError(f"{where}.{name}: {value!r} is not a finite number "
                             f"{'> 0' if name in positive else '>= 0'}; re-run testbed calibrate")
        out[name] = float(value)
    return out


def _op_fit(where: str, entry) -> OpFit:
    if not isinstance(entry, dict) or not isinstance(entry.get("base"), list) or len(entry["base"]) != 3:
        raise ValueError(f"{where}.base: three coefficients [seconds, seconds per FLOP, seconds per byte]")
    base = tuple(_terms(f"{where}.base", dict(zip("012", entry["base"])), ("0", "1", "2")).values())
    samples = []
    for i, row in enumerate(entry.get("samples") or []):
        ok = isinstance(row, list) and len(row) >= 3 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in row)
        if not ok:
            raise ValueError(f"{where}.samples.{i}: a list of finite numbers (features, then log ratio)")
        samples.append((tuple(float(v) for v in row[:-1]), float(row[-1])))
    if len({len(f) for f, _ in samples}) > 1:
        raise ValueError(f"{where}.samples: rows of different lengths; re-run testbed calibrate")
    return OpFit(base, tuple(samples))


def calibration_from_dict(where: str, data) -> Calibrated:
    """A device file's `latency:` mapping as a predictor; anything amiss is one line naming the entry."""
    where = f"{where}: latency"
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a mapping written by testbed calibrate (format: {FORMAT})")
    format_ = data.get("format")
    if format_ != FORMAT and format_ not in OLDER:
        raise ValueError(f"{where}.format: {format_!r} is not {FORMAT!r} (or {', '.join(map(repr, OLDER))}), the "
                         "formats this testbed reads; re-run testbed calibrate on the device")
    unknown = sorted(set(data) - {"format", "machine", "step", "fallback", "ops"})
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: unknown key; a calibration has format, machine, step, fallback, ops")
    lacks = OLDER.get(format_, ())
    step = _terms(f"{where}.step", data.get("step"), tuple(t for t in STEP_TERMS if t not in lacks))
    step |= dict.fromkeys(lacks, 0.0)
    step["scale"] = _terms(f"{where}.step.scale", (data.get("step") or {}).get("scale"), GROUPS)
    fallback = Roofline(**_terms(f"{where}.fallback", data.get("fallback"), ROOFLINE_TERMS,
                                 positive=("flops_per_s", "memory_Bps")))
    ops = data.get("ops")
    if not isinstance(ops, dict) or not ops:
        raise ValueError(f"{where}.ops: no fitted operations; re-run testbed calibrate")
    fits = {str(name): _op_fit(f"{where}.ops.{name}", entry) for name, entry in ops.items()}
    machine = data.get("machine") or {}
    if not isinstance(machine, dict):
        raise ValueError(f"{where}.machine: a mapping (processor, threads, device, torch, measured)")
    return Calibrated(fits, fallback=fallback, machine=machine, **step)
