"""FedDUMAP and its ablations and baselines as switches of one strategy: a server with its own data D0.

Paper: Liu, Jia, Zhang et al., "Efficient Federated Learning Using Dynamic Update and Adaptive Pruning with
Momentum on Shared Server Data" (ACM TIST; specs/feddumap.md). Per round t, from the devices' FedAvg
w_{t-1/2} = sum_k (n_k / n') w_k:
  FedDU   (Eq. 4, 6, 7) w^ = (1 - a) w_{t-1/2} + a w_srv, w_srv = tau SGD steps on D0 from w_{t-1/2} (tau =
          ceil(n0 E / B)), a = tau_eff / tau = (1 - acc_t) n0 D(P'_t) / (n0 D(P'_t) + n' D(P0)) C decay^t, acc_t
          the accuracy of w_{t-1/2} on D0; FedDU-S: a = steps / tau fixed.
  FedDUM  (Eq. 11, 12, 8) devices: SGD with an EMA momentum restarted each round; server: g = w_{t-1} - w^,
          m = beta m + (1 - beta) g (m_1 = g_1), w_t = w_{t-1} - eta_s m. ServerM: server momentum only;
          DeviceM: device momentum only.
  FedAP   (Alg. 3) at round T_p, after the above: p*_k per participant from its Hessian's eigen-gap, p* by
          Eq. 15, per-layer rates from a global magnitude threshold, HRank's filters kept
          (testbed/algorithms/fedap.py). Devices train the shrunk model from then on: its FLOPs are counted on
          the shrunk shape, its payloads carry the kept entries (and the pattern's bitmasks, ~0.2 KB).
          HRank: a uniform per-layer rate instead; IMC: the magnitude threshold as an unstructured mask
          (dense FLOPs and bytes, as the paper counts them). PruneFL (Jiang et al. 2023): IMC's mask at T_p
          as its initial prune on the server data, then every `reconfigure_every` rounds the mask is re-chosen,
          keeping as many entries, those of largest importance sum_b g_b^2 (squared minibatch gradients of the
          global model, pruned entries included; every entry costs the same time in dense counting, so
          g^2 / time ranks as g^2); regrown entries start at zero.
  Hybrid-FL: the server is one more client each round, trained on D0 from w_{t-1} and averaged with weight n0.
The server's own work (its SGD steps, scoring D0, the Hessian estimates, the rank passes) is reported as
metrics["server_flops"], which the engine charges to the server profile on the clock.
Deviations: PruneFL's importance is measured on the server's data by the server (charged to its clock), not
accumulated by the devices during their training and uploaded. P'_t and n' are of the devices that arrived
(the ones aggregated), not of all selected. The participants of the pruning rate are the server and the devices
of round T_p, not all N devices (a Lanczos run per device would cost more than the run), and their estimates are
charged to the server's clock; each uses the global model on its own first `hessian_samples` samples (spec
§9.7). The devices' learning rate does not decay.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from testbed.algorithms import fedap
from testbed.algorithms.base import (Arrival, Failure, LossFn, Params, Result, RoundContext, ServerState, Strategy,
                                     Task, task_for, weighted_mean)
from testbed.algorithms.fedavg import mean_metric
from testbed.algorithms.server_side import estimated_rate, server_accuracy, server_sgd, squared_gradients
from testbed.data.partition import js_divergence
from testbed.data.server import SharedData
from testbed.flops import training_flops
from testbed.local import LocalSGD
from testbed.payload import Dense, UnitMasked
from testbed.submodel import SubmodelCosts, entry_masks

SERVER_SGD = 0  # the purpose of the server's stream for its SGD (server_side.LANCZOS: its Hessian estimates)


@dataclass(frozen=True)
class FedDUMAP(Strategy):
    client: LocalSGD
    costs: SubmodelCosts = field(compare=False, repr=False)
    shared: SharedData = field(compare=False, repr=False)
    server_update: str = "dynamic"         # dynamic (FedDU) | fixed (FedDU-S) | client (Hybrid-FL) | none
    fixed_steps: int = 10                   # FedDU-S's tau_eff
    scale: float = 1.0                      # C
    decay: float = 0.99
    server_momentum: float | None = None    # beta; None: no server momentum
    server_lr: float = 1.0                  # eta_s
    prune_round: int | None = None          # T_p; None: no pruning
    prune: str = "hessian"                  # hessian (FedAP) | uniform (HRank) | unstructured (IMC) | adaptive
                                            # (PruneFL)
    prune_rate: float | None = None         # HRank's per-layer rate; else a fixed p* instead of the estimate
    lanczos_steps: int = 50
    hessian_samples: int = 100
    rank_samples: int = 500
    down: Dense = field(default_factory=Dense)
    up: Dense = field(default_factory=Dense)
    reconfigure_every: int = 10             # PruneFL: rounds between mask reconfigurations

    def init(self, params: Params) -> ServerState:
        return ServerState(params)

    def configure(self, state: ServerState, ctx: RoundContext, rng: np.random.Generator) -> list[Task]:
        held, units = state.optimizer.get("held"), state.optimizer.get("units")
        down, up, terms = self.down, self.up, {"extras": {"held": held}} if held is not None else {}
        if units is not None:  # the shrunk model: its kept entries travel, its shape is what devices compute
            down = up = UnitMasked.structured(self.costs.structure(units), self.up.dtype)
            terms["forward_flops"] = self.costs.forward_flops(units, structured=True)
        return [task_for(d, ctx, self.client, down, up, **terms)
                for d in ctx.selected]

    def objective(self, loss_fn: LossFn):
        def objective(params, anchor, x, y, extras):
            loss, accuracy = loss_fn(params, x, y)  # pruned entries are zero and stay so
            return loss, {"accuracy": accuracy} | ({"update_mask": extras["held"]} if "held" in extras else {})

        return objective

    def finish(self, task: Task, trained: Params, received: Params, stats: dict[str, float],
               opt_state: Params) -> Result:  # device momentum restarts every round: nothing is kept
        return Result({n: trained[n] - received[n] for n in received}, stats)

    def _forward_flops(self, optimizer: dict) -> int:
        units = optimizer.get("units")
        return self.costs.forward_flops(units or {}, structured=units is not None)

    def _train_on_server(self, params: Params, optimizer: dict, round: int) -> tuple[Params, int]:
        trained, samples = server_sgd(self.costs.model, params, self.shared.x, self.shared.y, self.client,
                                      self.shared.rng(SERVER_SGD, round), optimizer.get("held"))
        return trained, training_flops(self._forward_flops(optimizer), samples)

    def _alpha(self, half: Params, round: int, arrivals: list[Arrival]) -> float:
        """tau_eff / tau (Eq. 7), or FedDU-S's fixed steps / tau."""
        tau = len(self.client.batch_sizes(self.shared.size))
        if self.server_update == "fixed":
            return self.fixed_steps / tau
        acc = server_accuracy(self.costs.model, half, self.shared.x, self.shared.y)
        histograms = self.shared.device_histograms
        selected = histograms[[a.device for a in arrivals]].sum(axis=0)
        d_sel, d0 = js_divergence(selected, histograms.sum(axis=0)), self.shared.non_iid_degree
        n0, n_sel = self.shared.size, sum(a.num_samples for a in arrivals)
        importance = n0 * d_sel / (n0 * d_sel + n_sel * d0 + fedap.EPS)
        return (1 - acc) * importance * self.scale * self.decay ** round

    def aggregate(self, state: ServerState, round: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict[str, float]]:
        if not arrivals:
            return state, {}
        optimizer, metrics, flops = dict(state.optimizer), {"train_loss": mean_metric(arrivals, "train_loss")}, 0
        updates, weights = [a.update for a in arrivals], [a.num_samples for a in arrivals]
        if self.server_update == "client":  # Hybrid-FL
            trained, flops = self._train_on_server(state.params, optimizer, round)
            updates.append({n: trained[n] - state.params[n] for n in trained})
            weights.append(self.shared.size)
        delta = weighted_mean(updates, weights)
        target = {n: state.params[n] + delta[n] for n in state.params}
        if self.server_update in ("dynamic", "fixed"):
            alpha = metrics["server_alpha"] = self._alpha(target, round, arrivals)
            trained, cost = self._train_on_server(target, optimizer, round)
            flops += cost + self._forward_flops(optimizer) * self.shared.size * (self.server_update == "dynamic")
            target = {n: (1 - alpha) * target[n] + alpha * trained[n] for n in target}
        params = target
        if self.server_momentum is not None:
            g = {n: state.params[n] - target[n] for n in target}
            m = optimizer.get("m")
            optimizer["m"] = g if m is None else {n: self.server_momentum * m[n] + (1 - self.server_momentum) * g[n]
                                                  for n in g}
            params = {n: state.params[n] - self.server_lr * optimizer["m"][n] for n in g}
        if round == self.prune_round:
            params, optimizer, cost, metrics["tables"] = self._prune(params, optimizer, arrivals)
            flops += cost
        elif self.prune == "adaptive" and self.prune_round is not None and round > self.prune_round and \
                (round - self.prune_round) % self.reconfigure_every == 0:
            held, cost = self._reconfigure(params, optimizer["held"], round)
            params, optimizer, metrics["tables"] = self._masked(params, optimizer, held, {}, round)
            flops += cost
        return ServerState(params, optimizer, state.clients), metrics | {"server_flops": flops}

    def _prune(self, params: Params, optimizer: dict, arrivals: list[Arrival]):
        """FedAP / HRank / IMC at T_p: (params, optimizer with the masks, FLOPs, {file: rows})."""
        model, forward, flops, tables = self.costs.model, self._forward_flops(optimizer), 0, {}
        convs = fedap.conv_weights(model)
        if self.prune == "uniform":
            rates = {n: self.prune_rate for n in convs}
        else:  # p* from the server and the round's devices (IMC: the server alone), or the fixed prune_rate
            rate = self.prune_rate
            if rate is None:
                devices = [] if self.prune in ("unstructured", "adaptive") else [a.device for a in arrivals]
                rate, flops, tables["pruning_participants.csv"] = estimated_rate(
                    model, self.shared, params, devices, self.lanczos_steps, self.hessian_samples, forward)
            rates = fedap.layer_rates(params, convs, fedap.magnitude_threshold(params, rate))
        if self.prune in ("unstructured", "adaptive"):
            held = fedap.magnitude_masks(params, fedap.magnitude_threshold(params, rate))
        else:
            ranks = fedap.feature_ranks(model, params, self.shared.x[: self.rank_samples])
            flops += forward * min(self.rank_samples, self.shared.size)
            optimizer["units"] = fedap.keep_highest(ranks, rates)
            held = entry_masks(params, self.costs.structure(optimizer["units"]))
        held = {n: held[n] if n in held else torch.ones_like(p) for n, p in params.items()}
        params, optimizer, pruning = self._masked(params, optimizer, held, rates, self.prune_round)
        return params, optimizer, flops, tables | pruning

    def _masked(self, params: Params, optimizer: dict, held: Params, rates: dict, round: int):
        """The model and server momentum under the masks `held`: (params, optimizer, {"pruning.csv": rows})."""
        optimizer = optimizer | {"held": held}
        if "m" in optimizer:
            optimizer["m"] = {n: optimizer["m"][n] * held[n] for n in params}
        kept = {n: int(optimizer["units"][n].sum()) for n in rates} if "units" in optimizer else {}
        rows = [{"round": round, "layer": n, "filters": params[n].shape[0], "rate": rates.get(n, float("nan")),
                 "kept": kept.get(n, params[n].shape[0]), "entries_kept": float(held[n].mean())}
                for n in fedap.conv_weights(self.costs.model)]
        return {n: params[n] * held[n] for n in params}, optimizer, {"pruning.csv": rows}

    def _reconfigure(self, params: Params, held: Params, round: int) -> tuple[Params, int]:
        """PruneFL's new masks: as many entries as `held` keeps, those with the largest sum over one pass of the
        server's minibatches of the squared gradient (ties to the lower position); (masks, FLOPs of the pass)."""
        importance = squared_gradients(self.costs.model, params, self.shared.x, self.shared.y,
                                       self.client.batch_size, self.shared.rng(SERVER_SGD, round))
        flat = torch.cat([g.reshape(-1) for g in importance.values()])
        chosen = torch.zeros_like(flat)
        chosen[torch.argsort(-flat, stable=True)[:int(sum(h.sum() for h in held.values()))]] = 1.0
        sizes = [g.numel() for g in importance.values()]
        masks = {n: part.reshape(g.shape) for (n, g), part in zip(importance.items(), chosen.split(sizes))}
        return masks, training_flops(self._forward_flops({}), self.shared.size)
