"""Local optimizer state that travels with the model: the server averages the clients' moments as well.

Shared by FedAdam with moment averaging and its sparse variants (sparse_adam.py), FedLion and MFL (fedlion.py):
each round the server broadcasts the model W and the averaged optimizer state (parts "m", "v": the flat dict
keys "m:<name>" that the local optimizers and the multi-part codecs share), a device starts its local optimizer
from them, and uploads the model's change and each part's change through the strategy's codec. The server adds
the weighted mean of the changes (by samples, or uniformly), so with full participation a part becomes the mean
of the clients' values, as the papers write it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from testbed.algorithms.base import (Arrival, Failure, LossFn, Params, Result, RoundContext, ServerState, Strategy,
                                     Task, task_for, weighted_mean)
from testbed.algorithms.fedavg import mean_metric
from testbed.payload import Dense


def split_parts(tensors: Params) -> tuple[Params, Params]:
    """The model's tensors and the 'part:name' ones."""
    return ({n: t for n, t in tensors.items() if ":" not in n}, {n: t for n, t in tensors.items() if ":" in n})


@dataclass(frozen=True)
class MomentAveraging(Strategy):
    client: Any                # a local optimizer whose state is the parts below (LocalAdam, LocalLion, LocalSGD)
    up: Any                    # the uplink codec, with parts ("",) + PARTS
    down_dtype: str = "float32"   # the downlink: the model and every part, dense
    uniform: bool = False      # average the clients uniformly (FedLion's code) instead of by samples
    PARTS: ClassVar[tuple[str, ...]] = ("m",)

    @property
    def down(self) -> Dense:
        return Dense(self.down_dtype, ("",) + self.PARTS)

    def init(self, params: Params) -> ServerState:
        return ServerState(params, {part: {n: torch.zeros_like(p) for n, p in params.items()} for part in self.PARTS})

    def broadcast(self, state: ServerState) -> Params:
        return state.params | {f"{part}:{n}": t for part in self.PARTS for n, t in state.optimizer[part].items()}

    def configure(self, state: ServerState, ctx: RoundContext, rng: np.random.Generator) -> list[Task]:
        return [task_for(d, ctx, self.client, self.down, self.up) for d in ctx.selected]

    def start(self, task: Task, received: Params) -> tuple[Params, Params]:
        return split_parts(received)

    def objective(self, loss_fn: LossFn):
        def objective(params, anchor, x, y, extras):
            loss, accuracy = loss_fn(params, x, y)
            return loss, {"accuracy": accuracy}

        return objective

    def model_update(self, trained: Params, received: Params) -> Params:
        """What the device sends for the model (the change, by default); the server's `apply` undoes it."""
        return {n: trained[n] - received[n] for n in trained}

    def apply(self, params: Params, mean_update: Params) -> Params:
        return {n: p + mean_update[n] for n, p in params.items()}

    def finish(self, task: Task, trained: Params, received: Params, stats: dict[str, float],
               opt_state: Params) -> Result:
        parts = {key: opt_state[key] - received[key] for key in received if ":" in key}
        return Result(self.model_update(trained, received) | parts, stats)

    def aggregate(self, state: ServerState, round: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict[str, float]]:
        if not arrivals:
            return state, {}
        weights = [1.0 if self.uniform else a.num_samples for a in arrivals]
        mean = weighted_mean([a.update for a in arrivals], weights)
        parts = {part: {n: t + mean[f"{part}:{n}"] for n, t in state.optimizer[part].items()} for part in self.PARTS}
        return (ServerState(self.apply(state.params, mean), parts, state.clients),
                {"train_loss": mean_metric(arrivals, "train_loss")})
