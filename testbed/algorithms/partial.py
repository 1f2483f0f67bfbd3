"""Partial-model training: every device trains a structurally shrunk submodel of the global model.

Papers: HeteroFL (Diao et al., ICLR'21), FjORD (Horvath et al., NeurIPS'21), FedRolex (Alam et al., NeurIPS'22),
eFD (extended Federated Dropout, defined in the FjORD paper) and FedMP (Jiang et al., ICDE'22), as the FedLPS
paper compares them (specs/fedlps.md, Table I).
A device at ratio s keeps keep_count(n, s) units of every prunable layer, chosen by the method's pattern:
    HeteroFL  the first units ("ordered"),                           s = z_k
    FjORD     the first units,                                       s uniform among the width levels <= z_k
    FedRolex  a window of units that rolls by one every round,       s = z_k
    eFD       units drawn at random,                                 s = z_k
    FedMP     the units of largest L1 weight norm ("magnitude"),     s from the E-UCB bandit
Its submodel is the global model sliced to those output units and to the inputs still alive
(testbed/submodel.structure). The server sends exactly those entries, the device trains them (every other entry
is zero and stays so), and uploads its change on them with the pattern (payload.UnitMasked: row and column
bitmasks, then the kept entries). Compute is counted on the real shrunk shape.
Server (HeteroFL): every entry becomes the sample-weighted mean over the devices that held it; entries that
nobody held keep their value.
Deviations:
  - FjORD draws a width per local step; we draw one per round, so the clock knows the task's cost before it runs.
  - HeteroFL's Scaler (outputs divided by s in training) is left out; its static BatchNorm is what our models
    without running statistics do anyway.
  - Aggregation weights are sample counts (HeteroFL counts holders): the same when devices hold equal data.
  - FedMP prunes the current global model by magnitude for each device; its residual recovery is left out.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from testbed.algorithms.base import (Arrival, Failure, LossFn, Params, Result, RoundContext, ServerState, Strategy,
                                     Task, holder_mean, task_for)
from testbed.algorithms.fedavg import mean_metric
from testbed.algorithms.ratios import CapabilityRatio, RatioPolicy, observe_arrivals, select_with_ratios
from testbed.local import LocalSGD
from testbed.payload import UnitMasked
from testbed.submodel import SubmodelCosts, entry_masks, unit_masks


@dataclass(frozen=True)
class PartialModel(Strategy):
    client: LocalSGD
    costs: SubmodelCosts = field(compare=False, repr=False)
    pattern: str = "ordered"         # ordered | rolling | random | magnitude (testbed/submodel.py)
    ratios: RatioPolicy = field(default_factory=CapabilityRatio)
    dtype: str = "float32"

    def init(self, params: Params) -> ServerState:
        return ServerState(params)

    def configure(self, state: ServerState, ctx: RoundContext, rng: np.random.Generator) -> list[Task]:
        tasks = []
        for d, ratio in select_with_ratios(self.ratios, state.clients, ctx, rng):
            masks = unit_masks(state.params, self.costs.units, ratio, self.pattern, ctx.strategy_rng, ctx.round)
            shape = self.costs.structure(masks)
            codec = UnitMasked.structured(shape, self.dtype)
            tasks.append(task_for(d, ctx, self.client, codec, codec, ratio=ratio,
                                  forward_flops=self.costs.forward_flops(masks, structured=True),
                                  extras={"held": entry_masks(state.params, shape)}))
        return tasks

    def objective(self, loss_fn: LossFn):
        def objective(params, anchor, x, y, extras):
            loss, accuracy = loss_fn(params, x, y)  # entries outside the submodel are zero: the shrunk network
            return loss, {"accuracy": accuracy, "update_mask": extras["held"]}

        return objective

    def finish(self, task: Task, trained: Params, received: Params, stats: dict[str, float],
               opt_state: Params) -> Result:
        return Result({n: trained[n] - received[n] for n in received}, stats)

    def aggregate(self, state: ServerState, round: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict[str, float]]:
        if not arrivals:
            return state, {}
        delta = holder_mean([a.update for a in arrivals], [a.task.extras["held"] for a in arrivals],
                            [a.num_samples for a in arrivals])
        observe_arrivals(self.ratios, state.clients, round, arrivals)
        params = {n: state.params[n] + delta[n] for n in state.params}
        return ServerState(params, state.optimizer, state.clients), {"train_loss": mean_metric(arrivals, "train_loss")}
