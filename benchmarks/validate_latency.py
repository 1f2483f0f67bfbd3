"""How fast `testbed validate` answers: the wall-clock of `python -m testbed validate` in a fresh process on a
malformed scenario (a YAML syntax error: answered before the schema is imported), on a misspelt key and on an
unknown algorithm (the schema answers, without torch), on a valid scenario (no torch either), and
`python -m testbed --help` for reference; best of N, with the load average before and after (other processes on
the machine slow every figure alike), and the best CPU time (user + system) of the process, which a loaded
machine inflates much less: on an idle one the wall-clock is about that. The processes may write their bytecode
cache (__pycache__, ignored by git) whatever PYTHONDONTWRITEBYTECODE says, so that the best of N times an
installed package, not Python compiling the testbed's source.

    python benchmarks/validate_latency.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def best_of(repeat: int, *args: str, expect: int) -> tuple[float, float]:
    """The shortest wall-clock and CPU time (user + system) of `python -m testbed ARGS` in `repeat` fresh processes,
    this checkout's code first."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # the first run caches the bytecode, as an installed package has it
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        start, used = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run([sys.executable, "-m", "testbed", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True)
        best = min(best, time.perf_counter() - start)
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        best_cpu = min(best_cpu, now.ru_utime - used.ru_utime + now.ru_stime - used.ru_stime)
        assert done.returncode == expect, (args, done.returncode, done.stderr)
    return best, best_cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    valid = ROOT / "scenarios" / "quickstart.yaml"
    text = valid.read_text()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory() as folder:
        malformed, misspelt, unknown = (Path(folder) / f"{n}.yaml" for n in ("malformed", "misspelt", "unknown"))
        malformed.write_text(text.replace("client: {lr", "client: [lr", 1))   # an unclosed flow sequence
        misspelt.write_text(text.replace("\nclient:", "\nclent:", 1))
        unknown.write_text(text.replace("{name: fedavg}", "{name: fedavgg}", 1))
        cases = [("--help", ["--help"], 0), ("validate malformed.yaml (YAML error)", ["validate", str(malformed)], 2),
                 ("validate misspelt.yaml (schema error)", ["validate", str(misspelt)], 2),
                 ("validate unknown.yaml (unknown algorithm)", ["validate", str(unknown)], 2),
                 ("validate quickstart.yaml (valid)", ["validate", str(valid)], 0)]
        for label, argv, expect in cases:
            wall, cpu = best_of(args.repeat, *argv, expect=expect)
            print(f"{label:<42} {wall:6.3f} s, CPU {cpu:6.3f} s  (best of {args.repeat})", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
