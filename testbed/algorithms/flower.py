"""Flower server strategies, unchanged, on the simulated fleet: the adapter between a Flower Strategy and ours.

`algorithm: {name: flower, strategy: "flwr.serverapp.strategy:FedAdam", options: {...}}` runs the Flower
strategy's own configure/aggregate code on our devices, links, availability and deadlines, with our local
training. A round:
1. The testbed picks the cohort as for every algorithm (uniform among the usable devices, n_select of them, with
   the selection stream), and offers exactly those devices to Flower: their ids are the node ids of a Grid (Message
   API) or the client ids of a ClientManager (legacy API) that never waits. Flower's own sampling then runs on the
   cohort (fraction_train < 1 takes part of it). A cohort smaller than the strategy's minimum of nodes (too few
   devices online) trains nobody that round, as Flower's legacy ClientManager does when sampling fails (Flower
   would wait for nodes to connect; a round on the simulated clock cannot); a minimum above clients_per_round x
   overcommit, which no round could meet, is refused in one line.
2. Each message (each (ClientProxy, FitIns)) the strategy returns becomes a Task of that device. Devices train
   with the scenario's `client:` optimizer from the model received; the one config key they read is
   "proximal-mu" ("proximal_mu" in the legacy API: Flower's FedProx sends it; our objective then adds
   (mu/2)||w - x||^2 as testbed fedprox does). A strategy that sends a device arrays other than the global model
   is refused: our downlink carries the model.
3. Each device uploads its update through the scenario's uplink codec, as our FedAvg does; the server hands the
   strategy the trained model (its global model + the decoded update) with "num-examples" (the key Flower's
   strategies weight by) and the training metrics (train_loss, train_accuracy). Dropped, late and surplus devices
   reach the strategy as Flower reports failures: a reply Message carrying an Error (Message API; NODE_UNAVAILABLE
   for a device that went offline, REPLY_MESSAGE_UNAVAILABLE for one cut by the deadline or over-commit), or an
   entry of aggregate_fit's failures list (legacy API).
4. What the strategy aggregates is the new global model (cast back to the model's dtypes); None keeps the model.
   The train_loss column is the testbed's (sample-weighted mean over arrivals), not Flower's aggregated metrics.
Flower's evaluation hooks (configure_evaluate, aggregate_evaluate, evaluate_fn) are not called: the testbed
evaluates the global model itself on its schedule.
Flower keeps its state on the strategy object (FedAdam's moments, the current arrays): `init` builds a fresh one
for every run, and Python's and NumPy's global random generators (Flower samples nodes with `random.sample`; its
DP strategies draw noise from `np.random`) are seeded from the strategy stream around each call and restored
after, so the same scenario and seed give the same tables. A checkpoint holds the model but not the Flower
object, so `--resume` is refused in one line (run without --resume to start over).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from testbed.algorithms.base import (Arrival, Failure, LossFn, Params, RoundContext, ServerState, Strategy, Task,
                                     task_for)
from testbed.algorithms.fedavg import mean_metric, proximal_drift
from testbed.algorithms.flower_api import flower_call, speaker_for
from testbed.errors import TestbedError
from testbed.local import LocalSGD
from testbed.payload import Dense

PROXIMAL_MU = ("proximal-mu", "proximal_mu")   # the config key of Flower's FedProx (Message API, legacy)


def from_numpy(arrays: dict[str, np.ndarray], like: Params, reference: str) -> Params:
    """The strategy's aggregate as the model's tensors, each in the dtype of the model's own."""
    if list(arrays) != list(like) or any(arrays[n].shape != tuple(p.shape) for n, p in like.items()):
        raise TestbedError(f"algorithm.strategy: {reference} returned arrays that are not the model's (names "
                           "or shapes differ); use a strategy that aggregates the model it is sent")
    return {n: torch.from_numpy(np.array(arrays[n])).to(like[n].dtype) for n in like}


@dataclass(frozen=True, eq=False)
class FlowerStrategy(Strategy):
    """A Flower strategy class (either API) as a testbed Strategy. `run` holds this run's Flower strategy object
    (in the speaker of its API, testbed/algorithms/flower_api.py) and what it sent this round: the one mutable
    thing, made anew by init()."""

    client: LocalSGD
    reference: str                 # "package.module:Class", as the scenario names it
    options: dict                  # the Flower strategy's constructor arguments
    flower_class: type = field(repr=False)
    down: Dense = field(default_factory=Dense)
    up: Dense = field(default_factory=Dense)
    run: dict = field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self):  # to a Ray worker: the hyper-parameters, not this run's Flower object
        return {**vars(self), "run": {}}

    def init(self, params: Params) -> ServerState:
        self.run.clear()
        with flower_call(0, f"{self.reference}'s constructor"):
            speaker = speaker_for(self.flower_class)(self.flower_class, self.options, self.reference, params)
        self.run.update({"speaker": speaker, "round": 0, "sent": {}})
        return ServerState(params)

    def _live(self, round: int):
        if self.run.get("round") != round - 1:
            raise TestbedError("--resume: a Flower strategy keeps its state (FedAdam's moments, the current "
                               "arrays) on the Flower object, which a checkpoint does not hold; run without "
                               "--resume to start over")
        return self.run["speaker"]

    def configure(self, state: ServerState, ctx: RoundContext, rng: np.random.Generator) -> list[Task]:
        speaker = self._live(ctx.round)
        if ctx.n_select < speaker.minimum:
            raise TestbedError(f"algorithm.options: {self.reference} waits for {speaker.minimum} nodes (its "
                               f"min_available / min_train nodes) and a round offers it at most {ctx.n_select} "
                               "(round.clients_per_round x overcommit); lower them in algorithm.options or raise "
                               "round.clients_per_round")
        cohort = [int(d) for d in ctx.selected]
        seeds = [int(s) for s in ctx.strategy_rng.integers(2**32, size=2)]  # configure's and aggregate's
        with flower_call(seeds[0], f"{self.reference}'s configure, round {ctx.round},"):
            sent = speaker.configure(ctx.round, state.params, cohort)
        if not set(sent) <= set(cohort):
            raise TestbedError(f"algorithm.strategy: {self.reference} sent work to devices outside the round's "
                               f"cohort ({sorted(set(sent) - set(cohort))}); the testbed chooses who trains")
        if any(s.other_arrays for s in sent.values()):
            raise TestbedError(f"algorithm.strategy: {self.reference} sends devices arrays other than the global "
                               "model; the testbed's downlink carries the model only")
        self.run.update({"sent": sent, "seed": seeds[1]})
        return [task_for(d, ctx, self.client, self.down, self.up, extras=self._extras(sent[d].config))
                for d in sorted(sent)]

    @staticmethod
    def _extras(config: dict) -> dict:
        mu = [float(config[key]) for key in PROXIMAL_MU if key in config]
        return {"proximal_mu": torch.tensor(mu[0])} if mu else {}

    def objective(self, loss_fn: LossFn):
        def objective(params, anchor, x, y, extras):
            loss, accuracy = loss_fn(params, x, y)
            if "proximal_mu" in extras:
                loss = loss + 0.5 * extras["proximal_mu"] * proximal_drift(params, anchor)
            return loss, {"accuracy": accuracy}

        return objective

    def aggregate(self, state: ServerState, round: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict[str, float]]:
        speaker, sent = self._live(round), self.run["sent"]
        trained = [(a, {n: state.params[n] + a.update[n] for n in state.params}) for a in arrivals]
        with flower_call(self.run["seed"], f"{self.reference}'s aggregate, round {round},"):
            new = speaker.aggregate(round, state.params, [(sent[a.device], a, p) for a, p in trained],
                                    [(sent[f.device], f) for f in failures])
        self.run.update({"round": round, "sent": {}})
        params = state.params if new is None else from_numpy(new, state.params, self.reference)
        metrics = {"train_loss": mean_metric(arrivals, "train_loss")} if arrivals else {}
        return ServerState(params, state.optimizer, state.clients), metrics
