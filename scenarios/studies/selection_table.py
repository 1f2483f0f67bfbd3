"""The selection study's table (docs/selection.md): per setup and selector, mean ± std over seeds of the time to
the target accuracy (and how many seeds reached it), its speed-up over uniform selection (the ratio of the mean
times), the final accuracy, the uplink megabytes and joules spent to the target, and fairness: devices never
trained, the Gini coefficient of participation, the worst 10% of devices' local accuracy (analysis/fairness.py).

    python scenarios/studies/selection_table.py runs/studies/selection [out.csv]
"""
import math
import sys
from pathlib import Path

import pandas as pd

from analysis.fairness import fairness
from analysis.metrics import cost_to_accuracy
from analysis.runs import load_run
from study_tables import plus_minus

# Where the study's target is not the scenario's own: Shakespeare's 20 rounds end early in its training (a model
# predicting the commonest characters scores 0.18-0.20), and few runs reach its scenario's 0.25 by then
TARGETS = {"shakespeare": 0.22}


def per_run(run) -> dict:
    setup = run.name.split("-")[0]
    target = TARGETS.get(setup, run.target_accuracy)
    cost = cost_to_accuracy(run.rounds, target)
    reached = cost["time_s"] is not None
    return {"setup": setup, "selector": (run.scenario.get("selection") or {}).get("name", "uniform"),
            "seed": run.seed, "target": target, "reached": reached,
            "time_s": cost["time_s"] if reached else math.nan,
            "final_accuracy": run.summary["final_accuracy"],
            "uplink_MB": cost["bytes_up"] / 1e6 if reached else math.nan,
            "energy_J": cost.get("energy_J") if reached and cost.get("energy_J") is not None else math.nan,
            **fairness(run)}


def table(folder: str) -> pd.DataFrame:
    finished = sorted(Path(folder).glob("*/*/*/summary.json"))  # runs still under way have none
    runs = pd.DataFrame([per_run(load_run(p.parent)) for p in finished])
    rows = []
    for (setup, selector), group in runs.groupby(["setup", "selector"], sort=False):
        row = {"setup": setup, "selector": selector, "target": group["target"].iloc[0],
               "reached": f"{int(group['reached'].sum())}/{len(group)}"}
        for column in ("time_s", "final_accuracy", "uplink_MB", "energy_J", "never_trained", "gini",
                       "local_accuracy_p10"):
            row[column] = group[column].mean()
            row[f"{column}_std"] = group[column].std(ddof=0)
        rows.append(row)
    out = pd.DataFrame(rows)
    uniform = out[out["selector"] == "uniform"].set_index("setup")["time_s"]
    out["speedup"] = out["setup"].map(uniform) / out["time_s"]
    return out


def markdown(out: pd.DataFrame) -> str:
    lines = ["| setup | selector | reached | time to target (s) | speed-up | final acc. | uplink MB | energy J "
             "| never trained | Gini | worst 10% local acc. |", "|" + "---|" * 11]
    for _, r in out.iterrows():
        speedup = "n/a" if math.isnan(r["speedup"]) else f"{r['speedup']:.2f}x"
        lines.append(f"| {r['setup']} | {r['selector']} | {r['reached']} | {plus_minus(r, 'time_s', 2)} | {speedup} | "
                     f"{plus_minus(r, 'final_accuracy', 3)} | {plus_minus(r, 'uplink_MB', 1)} | {plus_minus(r, 'energy_J', 0)} | "
                     f"{plus_minus(r, 'never_trained', 1)} | {plus_minus(r, 'gini', 2)} | {plus_minus(r, 'local_accuracy_p10', 3)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    result = table(sys.argv[1])
    if len(sys.argv) > 2:
        result.to_csv(sys.argv[2], index=False)
    print(markdown(result))
