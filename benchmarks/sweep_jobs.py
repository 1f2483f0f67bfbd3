"""A study run one combination after another against `--jobs N` local worker processes: `testbed sweep` of
scenarios/studies/heterogeneity.yaml (27 runs: 3 algorithms x 3 heterogeneity levels x 3 seeds), the
commands as a user types them, wall-clock seconds of each, and a check that every rounds.csv and events.csv of
the parallel sweep is byte-identical to the serial one's (the study pins executor.threads: 1, so every run computes
on one thread wherever it runs). --serial-threads T runs the serial sweep on T threads instead (torch's default
on this machine is all cores): faster alone, but its tables then differ in the last digits and are not compared.

    python benchmarks/sweep_jobs.py [--jobs 2] [--rounds 60] [--seeds 0,1,2] [--serial-threads T] [--keep DIR]

About 13 minutes serial and 7 in parallel on 2 idle cores at the study's 60 rounds; --rounds and --seeds shorten it.
"""
from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import machine

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "scenarios" / "studies" / "heterogeneity.yaml"


def sweep(out: Path, jobs: int, rounds: int, seeds: str, threads: int | None = None) -> float:
    command = [sys.executable, "-m", "testbed", "sweep", str(STUDY), "--grid", "algorithm=[fedlps,heterofl,fedavg]",
               "--grid", "fleet.heterogeneity=[low,medium,high]", "--grid", f"seed=[{seeds}]",
               "--set", f"stop.max_rounds={rounds}", "--out", str(out), "--quiet", "--jobs", str(jobs)]
    command += ["--set", f"executor.threads={threads}"] if threads else []
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--serial-threads", type=int, help="torch threads of each serial run (default: the study's)")
    parser.add_argument("--keep", type=Path, help="keep the run folders here (default: deleted)")
    args = parser.parse_args(argv)
    print(f"sweep --jobs 1 vs --jobs {args.jobs} on {machine()}; load average {os.getloadavg()[0]:.2f}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="sweep_jobs_"))
    serial = sweep(work / "serial", 1, args.rounds, args.seeds, args.serial_threads)
    print(f"--jobs 1{f' on {args.serial_threads} threads' if args.serial_threads else ''}: {serial:.1f} s")
    parallel = sweep(work / "parallel", args.jobs, args.rounds, args.seeds)
    print(f"--jobs {args.jobs}: {parallel:.1f} s")
    tables = sorted(p.relative_to(work / "serial") for p in (work / "serial").rglob("*.csv")
                    if p.name in ("rounds.csv", "events.csv"))
    differ = [] if args.serial_threads else [
        str(t) for t in tables if not filecmp.cmp(work / "serial" / t, work / "parallel" / t, shallow=False)]
    print(f"\n| sweep | seconds | runs |\n|---|---|---|\n| --jobs 1 | {serial:.1f} | {len(tables) // 2} |\n"
          f"| --jobs {args.jobs} | {parallel:.1f} | {len(tables) // 2} |")
    same = ("not compared (the serial runs computed on another thread count)" if args.serial_threads else
            f"{len(tables) - len(differ)} of {len(tables)}" + (f" (differ: {differ})" if differ else ""))
    print(f"\nspeed-up {serial / parallel:.2f}x (target >= 1.7x with 2 jobs on 2 cores); rounds.csv and events.csv "
          f"byte-identical: {same}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    if not args.keep:
        shutil.rmtree(work)
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
