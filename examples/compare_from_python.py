"""The FedNova example from Python, as in a notebook (docs/extending.md): FedNova against FedAvg on the same fleet
and data, through testbed.run, and a table of the time each takes to 0.95 test accuracy.

    python examples/compare_from_python.py [--rounds 30] [--out runs]
"""
import argparse
from pathlib import Path

import testbed

HERE = Path(__file__).resolve().parent


def compare(rounds: int, out: str) -> dict[str, testbed.Run]:
    runs = {}
    for name, algorithm in (("fednova", "fednova:FedNova"), ("fedavg", "fedavg")):
        runs[name] = testbed.run(HERE / "fednova.yaml", out=out, quiet=True, plots=False,
                                 set={"name": name, "algorithm.name": algorithm, "stop.max_rounds": rounds})
    return runs


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", default="runs")
    args = parser.parse_args()
    for name, run in compare(args.rounds, args.out).items():
        reached = run.rounds[run.rounds["accuracy"] >= 0.95]
        when = f"{reached['t_end_s'].iloc[0]:.2f} s (round {reached['round'].iloc[0]})" if len(reached) else "not reached"
        print(f"{name:8s} final accuracy {run.summary['final_accuracy']:.3f}, 0.95 at {when}")
