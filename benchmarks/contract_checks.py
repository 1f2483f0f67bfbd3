"""Benchmark: what the plugin contract checks (testbed/contracts.py) cost a round of W1 (w1.yaml). W1 is run in
this process with FedAvg as a user's plugin (a subclass in a module of a temporary folder, so its results are
checked) and a user's uniform selector; every check is timed where it runs, and the time summed over the run is
divided by its rounds, beside the round's own wall time.

    python benchmarks/contract_checks.py [--rounds 5]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLUGIN = '''from dataclasses import dataclass

from testbed.algorithms import FedAvg
from testbed.selection import Uniform


@dataclass(frozen=True)
class PluginFedAvg(FedAvg):
    """A user's FedAvg: ours, subclassed."""


class PluginUniform(Uniform):
    """A user's selector: ours, subclassed."""
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import testbed
    from testbed import contracts

    spent: dict[str, float] = {}
    for name in ("state", "aggregated", "tasks", "picked", "results", "personal"):
        def timed(*a, _f=getattr(contracts.Contracts, name), _n=name, **k):
            start = time.perf_counter()
            try:
                return _f(*a, **k)
            finally:
                spent[_n] = spent.get(_n, 0.0) + time.perf_counter() - start
        setattr(contracts.Contracts, name, timed)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "w1_plugin.py").write_text(PLUGIN)
        sys.path.insert(0, folder)
        start = time.perf_counter()
        run = testbed.run(str(HERE / "w1.yaml"), set={"stop.max_rounds": args.rounds,
                                                      "algorithm.name": "w1_plugin:PluginFedAvg",
                                                      "selection.name": "w1_plugin:PluginUniform"},
                          out=Path(folder) / "runs", quiet=True, plots=False)
        wall = time.perf_counter() - start
    rounds = len(run.rounds)
    total = sum(t for n, t in spent.items() if n != "state")   # state runs inside aggregated (and once for init)
    print(f"W1, {rounds} rounds, user FedAvg and selector checked: {wall / rounds * 1e3:.0f} ms a round (run "
          f"incl. build); checks {total / rounds * 1e6:.0f} us a round ({total / wall * 100:.3f}% of the run)")
    for name, t in sorted(spent.items()):
        print(f"  {name}: {t / rounds * 1e6:.1f} us a round")


if __name__ == "__main__":
    main()
