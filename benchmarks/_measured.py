"""A fidelity run's measurements as a file (clock_fidelity.py --save / --replay): every calibration network's trace
and fastest times (its ops' and its step's), and every case's trace and measured step. Replaying one refits the
clock on exactly those measurements, so two predictors are compared on the same numbers rather than on two runs
of a machine whose speed moves between runs (RESULTS.md). JSON, gzipped: data only, nothing in it runs."""
from __future__ import annotations

import gzip
import json
import os
import sys
from dataclasses import dataclass

from testbed.latency.calibration import op_samples
from testbed.latency.timing import Fastest
from testbed.latency.trace import Op, Step

FORMAT = "testbed-fidelity-measurements/2"   # /2: each step's module calls
HALVES = ("early", "late")   # a case's fastest over the first and the second half of its rounds
HOST = "host_trace"   # a case measured on a GPU: its step traced on the CPU too (clock_fidelity.HOST_TRACE)


@dataclass
class Recorded:
    """A calibration network as fit() reads it (calibration.Measurement's trace, fastest and samples)."""

    label: str
    trace: Step
    fastest: Fastest

    def samples(self):
        return op_samples(self.trace, self.fastest)


def _step(step: Step) -> dict:
    return {"tensors": step.tensors, "modules": step.modules,
            "ops": [[op.name, op.flops, op.nbytes, list(op.shapes)] for op in step.ops]}


def _unstep(data: dict) -> Step:
    return Step(tuple(Op(name, flops, nbytes, tuple(shapes)) for name, flops, nbytes, shapes in data["ops"]),
                data["tensors"], data["modules"])


def save(path: str, nets, rows: list[dict], steps, machine: dict) -> None:
    """nets: the calibration's Measurements; rows: the cases' rows; steps: the cases' Measurements."""
    data = {"format": FORMAT, "machine": machine,
            "networks": [{"label": m.work.label, "trace": _step(m.trace),
                          "rounds": m.fastest.rounds, "best": {str(k): v for k, v in m.fastest.best.items()}}
                         for m in nets],
            "cases": [{"case": r["case"], "own": r["own"], "flops": r["flops"], "trace": _step(m.trace),
                       "measured_s": m.fastest.best["step"]}
                      | ({HOST: _step(r[HOST])} if HOST in r else {})
                      | {f"{half}_s": m.fastest.best[half] for half in HALVES if half in m.fastest.best}
                      for r, m in zip(rows, steps)]}
    with gzip.open(f"{path}.part", "wt") as f:   # then renamed: a run killed mid-write keeps the last round's file
        json.dump(data, f)
    os.replace(f"{path}.part", path)


def _refuse(line: str):
    """A file --replay cannot read: one line, exit 2."""
    print(line, file=sys.stderr)
    raise SystemExit(2)


def load(path: str) -> tuple[list[Recorded], list[dict], list[Step], dict]:
    """(calibration networks, the cases' rows with measured_ms, the cases' traces, the machine)."""
    try:
        with gzip.open(path, "rt") as f:
            data = json.load(f)
    except (OSError, EOFError, ValueError) as err:
        _refuse(f"--replay {path}: not a file that --save wrote ({err})")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        format_ = data.get("format") if isinstance(data, dict) else None
        _refuse(f"--replay {path}: format {format_!r} is not {FORMAT!r}; save it again with this version")
    nets = []
    for n in data["networks"]:
        fastest = Fastest()
        fastest.best = {(k if k == "step" else int(k)): v for k, v in n["best"].items()}
        fastest.rounds = n["rounds"]
        nets.append(Recorded(n["label"], _unstep(n["trace"]), fastest))
    rows = [{"case": c["case"], "own": c["own"], "flops": c["flops"], "measured_ms": c["measured_s"] * 1e3}
            | ({HOST: _unstep(c[HOST])} if HOST in c else {})
            | {f"{half}_ms": c[f"{half}_s"] * 1e3 for half in HALVES if f"{half}_s" in c} for c in data["cases"]]
    return nets, rows, [_unstep(c["trace"]) for c in data["cases"]], data["machine"]
