"""Where the rounds of the availability study went, per scenario: mean ± std over seeds of the devices online at
a round's start, selected, kept, dropped (went offline mid-task) and surplus (arrived after the first K) per
round, and the share of FLOPs and the megabytes spent on updates the server never used (docs/availability.md).

    python scenarios/studies/availability_table.py runs/studies/availability
"""
import sys
from pathlib import Path

import pandas as pd

from analysis.runs import load_run, scenario_groups

PER_ROUND = {"online": "online", "selected": "selected", "arrived": "kept", "dropped": "dropped", "surplus": "surplus"}


def per_run(run) -> dict:
    rounds, summary = run.rounds, run.summary
    return {**{label: rounds[column].mean() for column, label in PER_ROUND.items()},
            "wasted FLOPs %": 100 * summary["wasted_flops_total"] / summary["flops_total"],
            "wasted MB": summary["wasted_bytes_total"] / 1e6, "sim. s": summary["sim_time_s"]}


def main(folder: str) -> None:
    runs = [load_run(p.parent) for p in sorted(Path(folder).glob("*/*/rounds.csv"))]
    table = {}
    for name, group in scenario_groups(runs).items():
        values = pd.DataFrame([per_run(run) for run in group])
        table[name] = {c: f"{values[c].mean():.2f} ± {values[c].std(ddof=0):.2f}" for c in values}
    print(pd.DataFrame(table).T.to_string())


if __name__ == "__main__":
    main(sys.argv[1])
