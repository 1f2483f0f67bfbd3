"""The per-layer pruning rates of docs/feddumap.md: for each run folder with a pruning.csv, each conv layer's rate
and filters kept, p* and the participants' p*_k, and the pruned model's forward multiply-adds per sample
(fvcore, counted on the shrunk shape as the devices train it).

    python docs/feddumap/pruning_table.py runs/fdm_feddumap/* runs/fdm_fedap/*
"""
import sys
from pathlib import Path

import pandas as pd
import torch

from testbed import scenario as sc
from testbed.algorithms.fedap import aggregate_rate
from testbed.submodel import SubmodelCosts

rows = []
for run in map(Path, sys.argv[1:]):
    if not (run / "pruning.csv").is_file():
        continue
    layers = pd.read_csv(run / "pruning.csv")
    exp = sc.build(sc.load(run / "scenario.resolved.yaml"))
    costs = SubmodelCosts(exp.model, exp.dataset.train_x[:1])
    masks = {row.layer: torch.arange(row.filters) < row.kept for row in layers.itertuples()}
    participants = run / "pruning_participants.csv"
    table = pd.read_csv(participants) if participants.is_file() else None
    p_star = "" if table is None else \
        f"{aggregate_rate(table['rate'].to_numpy(), table['samples'].to_numpy(), table['non_iid_degree'].to_numpy()):.3f}"
    rates = table["rate"] if table is not None else pd.Series(dtype=float)
    rows.append({"run": f"{run.parent.name}/{run.name}",
                 **{f"{row.layer.split('.')[0]} rate / kept": f"{row.rate:.3f} / {row.kept}/{row.filters}"
                    for row in layers.itertuples()},
                 "p*": p_star,
                 "p*_k (server; devices mean)": f"{rates.iloc[0]:.3f}; {rates.iloc[1:].mean():.3f}" if len(rates) else "",
                 "MFLOPs dense -> pruned": f"{costs.forward_flops({}, structured=False) / 1e6:.3f} -> "
                                           f"{costs.forward_flops(masks, structured=True) / 1e6:.3f}"})
frame = pd.DataFrame(rows).fillna("")
print("\n".join("| " + " | ".join(map(str, cells)) + " |"
                for cells in [frame.columns, ["---"] * len(frame.columns), *frame.itertuples(index=False)]))
