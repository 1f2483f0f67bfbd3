"""Benchmark W1 through the Python API in-process against the command line as a process: what a notebook or a
script saves by calling `testbed.run` instead of `testbed run`, and that the API itself adds nothing.

  api, in-process   `testbed.run("benchmarks/w1.yaml", out=<tmp>, quiet=True)` in this process, after a first call
                    (not timed: torch, the analysis and the dataset cache are loaded once, as in a notebook)
  cli, process      `python -m testbed run benchmarks/w1.yaml --out <tmp> --quiet`: imports, dataset cache, fleet,
                    20 rounds with evaluation, tables, report and plots, in a fresh interpreter each time
  api, process      `python -c "import testbed; testbed.run(...)"`: the same work as the command line, through the
                    API, in a fresh interpreter (their ratio is the API's own cost: about 1)

All three write the same run folder with its report and plots; the rounds.csv of each is compared byte for byte.
Interleaved, best of --repeat.

    python benchmarks/api_vs_cli.py [--repeat 3] [--rounds 20]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
W1 = HERE / "w1.yaml"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)

    import testbed
    from _harness import machine

    print(f"W1, testbed.run in-process vs the testbed run process, on {machine()}; "
          f"load average {os.getloadavg()[0]:.2f}")
    work = Path(tempfile.mkdtemp(prefix="api_vs_cli_"))
    rounds = f"stop.max_rounds={args.rounds}"
    code_root = Path(testbed.__file__).resolve().parent.parent  # the processes import the testbed this one does
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(code_root), os.environ.get("PYTHONPATH")])))
    start = time.perf_counter()
    first = testbed.run(W1, set=[rounds], out=work / "first", quiet=True)  # imports and dataset cache, not timed
    print(f"api, first call in this process (loads the dataset cache and the analysis; not in the table): "
          f"{time.perf_counter() - start:.2f} s")

    def api_in_process(out: Path) -> None:
        testbed.run(W1, set=[rounds], out=out, quiet=True)

    def cli_process(out: Path) -> None:
        subprocess.run([sys.executable, "-m", "testbed", "run", str(W1), "--set", rounds, "--out", str(out),
                        "--quiet"], check=True, env=env, stdout=subprocess.DEVNULL)

    def api_process(out: Path) -> None:
        code = f"import testbed; testbed.run({str(W1)!r}, set=[{rounds!r}], out={str(out)!r}, quiet=True)"
        subprocess.run([sys.executable, "-c", code], check=True, env=env)

    ways = {"api, in-process": api_in_process, "cli, process": cli_process, "api, process": api_process}
    best = dict.fromkeys(ways, float("inf"))
    same = True
    for attempt in range(args.repeat):  # interleaved: a burst of load elsewhere hits one attempt of each
        for name, way in ways.items():
            out = work / f"{attempt}-{name.replace(', ', '_')}"
            start = time.perf_counter()
            way(out)
            seconds = time.perf_counter() - start
            print(f"{name}: {seconds:.2f} s")
            best[name] = min(best[name], seconds)
            same &= (out / "w1" / "0" / "rounds.csv").read_bytes() == (first.path / "rounds.csv").read_bytes()
            shutil.rmtree(out)
    print(f"\n| W1, {args.rounds} rounds, report and plots | seconds (best of {args.repeat}) |\n|---|---|")
    for name, seconds in best.items():
        print(f"| {name} | {seconds:.2f} |")
    print(f"\napi in-process / cli process: {best['api, in-process'] / best['cli, process']:.2f}x; "
          f"api process / cli process: {best['api, process'] / best['cli, process']:.2f}x; "
          f"rounds.csv byte-identical in every run: {same}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (2 cores: above 2, other processes competed)")
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
