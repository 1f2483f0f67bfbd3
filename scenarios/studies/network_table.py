"""The network study's table (docs/network.md): per setup and variant (and concurrency, for FedBuff), mean ± std
over seeds of the time to the target accuracy (and how many seeds reached it), the rounds to it, the mean round's
simulated seconds, the uplink and downlink megabytes to it, the seconds transfers waited on shared links per round
(network_wait_s; 0 on private links) and the backhaul megabytes where there is a backhaul.

    python scenarios/studies/network_table.py runs/studies/network [out.csv] [--intervals]

out.csv has each column's 95% interval over seeds too (<column>_ci95_low, _ci95_high: Student's t, study_tables.py);
--intervals prints them in the cells instead of ± std.
"""
import math
import sys
from pathlib import Path

import pandas as pd

from analysis.metrics import cost_to_accuracy
from analysis.runs import load_run
from study_tables import in_interval, plus_minus, seed_columns


def per_run(run) -> dict:
    setup, _, variant = run.name.partition("-")
    protocol = run.scenario.get("protocol") or {}
    if "concurrency" in protocol:   # a sweep's name ends in its concurrency: the column says it
        variant = variant.removesuffix(f"-{protocol['concurrency']}")
    cost = cost_to_accuracy(run.rounds, run.target_accuracy)
    reached = cost["time_s"] is not None
    rounds = run.rounds
    until = rounds if not reached else rounds[rounds["t_end_s"] <= cost["time_s"]]
    columns = [c for c in ("backhaul_bytes_up", "backhaul_bytes_down") if c in until]
    backhaul = sum(until[c].sum() for c in columns) if columns else math.nan   # NaN: no backhaul
    return {"setup": setup, "variant": variant, "concurrency": protocol.get("concurrency", math.nan),
            "seed": run.seed, "target": run.target_accuracy, "reached": reached,
            "time_s": cost["time_s"] if reached else math.nan,
            "rounds": len(until) if reached else math.nan,
            "round_s": float((rounds["t_end_s"] - rounds["t_start_s"]).mean()),
            "up_MB": cost["bytes_up"] / 1e6 if reached else math.nan,
            "down_MB": until["bytes_down"].sum() / 1e6 if reached else math.nan,
            "wait_s": float(rounds["network_wait_s"].mean()) if "network_wait_s" in rounds else 0.0,
            "backhaul_MB": backhaul / 1e6 if reached else math.nan,
            "final_accuracy": run.summary["final_accuracy"]}


COLUMNS = ("time_s", "rounds", "round_s", "up_MB", "down_MB", "wait_s", "backhaul_MB", "final_accuracy")


def table(folder: str) -> pd.DataFrame:
    finished = sorted(Path(folder).glob("*/*/*/summary.json"))
    runs = pd.DataFrame([per_run(load_run(p.parent)) for p in finished])
    rows = []
    for (setup, variant, concurrency), group in runs.groupby(["setup", "variant", "concurrency"], sort=False,
                                                             dropna=False):
        row = {"setup": setup, "variant": variant, "concurrency": concurrency,
               "reached": f"{int(group['reached'].sum())}/{len(group)}"}
        for column in COLUMNS:
            row |= seed_columns(group[column], column)
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["setup", "concurrency", "variant"], kind="stable")


def markdown(out: pd.DataFrame, intervals: bool = False) -> str:
    """The table in markdown: cells mean ± std over seeds, or with `intervals` mean [95% interval]."""
    cell = in_interval if intervals else plus_minus
    lines = ["| setup | variant | in flight | reached | time to 0.9 (s) | rounds | round (s) | uplink MB | "
             "downlink MB | waited on links (s/round) | backhaul MB | final acc. |", "|" + "---|" * 12]
    for _, r in out.iterrows():
        flight = "" if math.isnan(r["concurrency"]) else f"{int(r['concurrency'])}"
        lines.append(f"| {r['setup']} | {r['variant']} | {flight} | {r['reached']} | {cell(r, 'time_s', 1)} | "
                     f"{cell(r, 'rounds', 1)} | {cell(r, 'round_s', 2)} | {cell(r, 'up_MB', 1)} | {cell(r, 'down_MB', 1)} | "
                     f"{cell(r, 'wait_s', 2)} | {cell(r, 'backhaul_MB', 1)} | {cell(r, 'final_accuracy', 3)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--intervals"]
    result = table(args[0])
    if len(args) > 1:
        Path(args[1]).parent.mkdir(parents=True, exist_ok=True)
        result.to_csv(args[1], index=False)
    print(markdown(result, intervals="--intervals" in sys.argv))
