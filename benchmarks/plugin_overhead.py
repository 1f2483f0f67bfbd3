"""Benchmark: does a plugin cost anything? W1 (w1.yaml) end to end as a user runs it, the process
`python -m testbed run benchmarks/w1.yaml`, with the built-in `fedavg` against the same FedAvg as a user's plugin
(a module in the current directory subclassing ours, named `algorithm: {name: "w1_plugin:PluginFedAvg"}`).

Both processes do the same work (the plugin's tables must equal the built-in's byte for byte, checked after the
timed runs), so the ratio is what resolving, validating and calling user code adds. Interleaved, best of
--repeat; a first untimed run builds the dataset cache.

    python benchmarks/plugin_overhead.py [--repeat 3] [--rounds 20]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLUGIN = '''from dataclasses import dataclass

from testbed.algorithms import FedAvg


@dataclass(frozen=True)
class PluginFedAvg(FedAvg):
    """A user's FedAvg: ours, subclassed."""
'''


def run(folder: Path, out: Path, rounds: int, *sets: str) -> float:
    command = [sys.executable, "-m", "testbed", "run", str(HERE / "w1.yaml"), "--quiet", "--out", str(out),
               "--set", f"stop.max_rounds={rounds}", *[a for s in sets for a in ("--set", s)]]
    start = time.perf_counter()
    subprocess.run(command, cwd=folder, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "w1_plugin.py").write_text(PLUGIN)
        run(folder, folder / "warm", 1)  # the dataset cache, not timed
        times = {"builtin": [], "plugin": []}
        for i in range(args.repeat):
            times["builtin"].append(run(folder, folder / f"builtin{i}", args.rounds))
            times["plugin"].append(run(folder, folder / f"plugin{i}", args.rounds,
                                       "algorithm.name=w1_plugin:PluginFedAvg"))
        same = all((folder / "builtin0/w1/0" / t).read_bytes() == (folder / "plugin0/w1/0" / t).read_bytes()
                   for t in ("rounds.csv", "events.csv"))
    best = {k: min(v) for k, v in times.items()}
    print(f"W1, {args.rounds} rounds, `python -m testbed run` as a process, best of {args.repeat}:")
    for kind, seconds in times.items():
        print(f"  {kind:8s} {best[kind]:7.2f} s   (all: {', '.join(f'{s:.2f}' for s in seconds)})")
    print(f"plugin / built-in: {best['plugin'] / best['builtin']:.3f}x; tables identical: {same}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
