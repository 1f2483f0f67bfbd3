"""docs/latency.md's FedAP rows: FedAP's structured pruning against FedAvg on scenarios/feddumap.yaml (the prune at
round 30), on each clock, over the seeds run (runs/latency_study/fedap-<clock>/fdm_<method>/<seed>/). Per seed:
the mean round time after the prune (rounds 31 on), the mean compute phase after it, the 50 rounds' simulated
time, the final accuracy; then each method's mean with its 95% interval and FedAP against FedAvg
(analysis/intervals.py: times on logs, a ratio; accuracies on logits, a difference; Welch's t).

    python docs/latency/fedap_rounds.py [RUNS]   (RUNS: runs/latency_study)
"""
import sys
from pathlib import Path

import pandas as pd

from analysis.intervals import effect_interval, interval_text, mean_interval, ratio_interval
from analysis.scales import LOG, LOGIT

PRUNE_ROUND = 30


def per_seed(run: Path) -> dict:
    rounds = pd.read_csv(run / "rounds.csv")
    events = pd.read_csv(run / "events.csv")
    after = rounds[rounds["round"] > PRUNE_ROUND]
    computes = events[(events["phase"] == "compute") & (events["round"] > PRUNE_ROUND)]
    return {"round_s": (after["t_end_s"] - after["t_start_s"]).mean(),
            "compute_s": (computes["end_s"] - computes["start_s"]).mean(),
            "total_s": rounds["t_end_s"].iloc[-1], "final_accuracy": rounds["accuracy"].dropna().iloc[-1]}


def main(root: Path) -> None:
    for clock in ("flops", "latency"):
        seeds = {m: {int(p.name): per_seed(p) for p in sorted((root / f"fedap-{clock}" / f"fdm_{m}").iterdir())
                     if (p / "summary.json").is_file()} for m in ("fedap", "fedavg")}
        common = sorted(seeds["fedap"].keys() & seeds["fedavg"].keys())
        print(f"{clock} clock, seeds {common[0]}-{common[-1]} ({len(common)})")
        for key, label in (("round_s", "a round after the prune"), ("compute_s", "a compute phase after it"),
                           ("total_s", "50 rounds")):
            values = {m: [seeds[m][s][key] for s in common] for m in seeds}
            means = {m: interval_text(*mean_interval(values[m], LOG)[1:], 3) for m in values}
            ratio = interval_text(*ratio_interval(values["fedap"], values["fedavg"]), 2)
            print(f"  {label:26s} FedAP {means['fedap']:24s} FedAvg {means['fedavg']:24s} ratio {ratio}")
        accuracy = {m: [seeds[m][s]["final_accuracy"] for s in common] for m in seeds}
        means = {m: interval_text(*mean_interval(accuracy[m], LOGIT)[1:], 3) for m in accuracy}
        difference = interval_text(*effect_interval(accuracy["fedap"], accuracy["fedavg"], LOGIT), 3)
        print(f"  {'final accuracy':26s} FedAP {means['fedap']:24s} FedAvg {means['fedavg']:24s} "
              f"difference {difference}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/latency_study"))
