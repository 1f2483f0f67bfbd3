"""What the tracker tests share: a hand-written 3-round run (round 2 not evaluated: its NaN accuracy and loss must not
be logged), its expected metrics, a resolved scenario with nesting, lists of dicts, a null and a long value, and a
summary."""
from pathlib import Path

from testbed.trackers import TrackedRun

NAN = float("nan")
ROWS = [
    dict(round=1, t_start_s=0.0, t_end_s=1.5, online=10, selected=4, arrived=4, dropped=0, bytes_up=100,
         bytes_down=200, flops=1000, train_loss=2.5, accuracy=0.5, loss=2.0, local_accuracy=NAN, energy_J=1.25),
    dict(round=2, t_start_s=1.5, t_end_s=3.25, online=9, selected=4, arrived=3, dropped=1, bytes_up=100,
         bytes_down=200, flops=1000, train_loss=2.25, accuracy=NAN, loss=NAN, local_accuracy=NAN, energy_J=0.5),
    dict(round=3, t_start_s=3.25, t_end_s=4.0, online=10, selected=4, arrived=4, dropped=0, bytes_up=50,
         bytes_down=200, flops=1000, train_loss=2.0, accuracy=0.75, loss=1.0, local_accuracy=NAN, energy_J=0.25),
]
# metric -> [(round, value)] as every backend must log it (NaNs absent, t_end_s as sim_time_s, running totals)
EXPECTED = {
    "accuracy": [(1, 0.5), (3, 0.75)],
    "loss": [(1, 2.0), (3, 1.0)],
    "train_loss": [(1, 2.5), (2, 2.25), (3, 2.0)],
    "dropped": [(1, 0.0), (2, 1.0), (3, 0.0)],
    "sim_time_s": [(1, 1.5), (2, 3.25), (3, 4.0)],
    "t_start_s": [(1, 0.0), (2, 1.5), (3, 3.25)],
    "bytes_up_total": [(1, 100.0), (2, 200.0), (3, 250.0)],
    "bytes_down_total": [(1, 200.0), (2, 400.0), (3, 600.0)],
    "flops_total": [(1, 1000.0), (2, 2000.0), (3, 3000.0)],
    "energy_J_total": [(1, 1.25), (2, 1.75), (3, 2.0)],
}
NEVER = {"local_accuracy", "round", "t_end_s"}  # all NaN; the step; logged as sim_time_s
SIM_MS = {1: 1500, 2: 3250, 3: 4000}
PARAMS = {"name": "quickstart", "seed": 0, "data": {"name": "mnist5k", "root": None, "options": {},
                                                   "partition": {"kind": "dirichlet", "alpha": 0.5}},
          "fleet": {"groups": [{"profile": "phone_high", "count": 15}, {"profile": "board", "count": 5}]},
          "stop": {"targets": [0.9, 0.95]}, "executor": {"batched": True}, "description": "x" * 7000}
FLAT = {"name": "quickstart", "seed": 0, "data.name": "mnist5k", "data.partition.kind": "dirichlet",
        "data.partition.alpha": 0.5, "fleet.groups.0.profile": "phone_high", "fleet.groups.0.count": 15,
        "fleet.groups.1.profile": "board", "fleet.groups.1.count": 5, "stop.targets": [0.9, 0.95],
        "executor.batched": True, "description": "x" * 7000}
SUMMARY = {"scenario": "quickstart", "seed": 0, "status": "completed", "final_accuracy": 0.75, "best_accuracy": 0.75,
           "sim_time_s": 4.0, "bytes_up_total": 250, "time_to_accuracy_s": {"0.5": 1.5, "0.9": None}}


def tracked_run(out: Path, group: str | None = None, name: str = "quickstart/0") -> TrackedRun:
    """A run named `name` in out/<name> (a sweep's: out/<group>/<name>; `out` its --out), its folder made, with
    plots/a.png and rounds.csv in it."""
    folder = Path(out) / (group or "") / name
    (folder / "plots").mkdir(parents=True, exist_ok=True)
    (folder / "plots" / "a.png").write_bytes(b"\x89PNG not really")
    (folder / "rounds.csv").write_text("round\n1\n2\n3\n")
    return TrackedRun(name=name, group=group, scenario="quickstart", params=PARAMS, folder=folder, out=Path(out))


def files(run: TrackedRun) -> list[Path]:
    return [run.folder / "plots" / "a.png", run.folder / "rounds.csv"]


def play(trackers, run: TrackedRun, end: str | None = None, say=None) -> None:
    """start (its lines to `say`), the 3 rows, then finish (end None) or close(end)."""
    trackers.start(say=say)
    for row in ROWS:
        trackers.log(row)
    if end is None:
        trackers.finish(SUMMARY, files(run))
    else:
        trackers.close(end)
