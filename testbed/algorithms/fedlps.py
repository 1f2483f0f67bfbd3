"""FedLPS: learnable sparse patterns, with a per-device sparse ratio from a ratio policy (P-UCBV by default).

Paper: Xue et al., "Learnable Sparse Customization in Heterogeneous Edge Computing" (FedLPS), Alg. 1 and eq. 2-13;
digest in specs/fedlps.md, which also read the authors' code (sunnyxuejj/FedLPS).
A device k selected in round r, at ratio s (P-UCBV: min(z_k, s_bandit); FLST: 0.5; RCR: z_k):
    Q_k: one importance score per unit (output channel, neuron, recurrent gate row, embedding row) of every
         prunable layer but the classifier (testbed/models/units.py); the device keeps it between rounds
    every minibatch: m_j = 1 if q_j is among the keep_count(n, s) largest scores of its layer (eq. 4-5: the
         per-layer (1-s)-quantile threshold), else 0; the forward pass uses w * m
    L = CE(f(x; w * m), y) + mu ||w - w^r||^2 + lambda sum_layers mean_j (q_j - sigmoid(||w_j * m_j||_1))^2
    SGD on w and Q together; pruned weights keep their values (their update is masked, as the code restores them)
    uploads (w - w^r) * m: masked weights as a unit bitmask plus the kept rows (payload.UnitMasked), the rest
    dense; keeps Q and its personal model w * m
Server (eq. 12-13): w^{r+1} = w^r + sum_k n_k (w_k - w^r) * m_k / sum_k n_k: where a device pruned, it contributes
    the old global value. The ratio policy then observes each arrival (P-UCBV: a_k^r = the round's mean train
    accuracy; T_k = compute seconds + alpha * upload seconds, from the device's timeline).
Evaluation: each device's latest personal model on its own test split (Engine; the global model where it has none).
Choices where the paper is silent (spec sec. 6):
  - The gate's gradient is a straight-through estimator: dL/dq_j = sum over unit j's weights of dL/d(w m_j) * w.
    `code_faithful` follows the authors' code instead: the task loss sends Q no gradient (it learns from L_ir
    only, pruned units' scores frozen), no L_pr, and Q re-drawn every round.
  - Q persists across rounds (paper); it starts as standard normals sorted in descending order, so the first
    mask is the ordered one (the code's init).
  - L_ir's target is the sigmoid of the unit's L1 norm over its masked weights, without gradient (code); its MSE
    is a mean per layer (code), summed over layers.
  - Aggregation weights |D_k| (paper); no added noise (the code adds N(0, 0.001^2)).
Deviations: a constant learning rate (the code decays it by 0.998 per round); the strategy's own random stream
  (ctx.strategy_rng) draws the ratios and initial scores, so selection is the same as FedAvg's for a seed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from testbed.algorithms.base import (Arrival, Failure, LossFn, Params, Result, RoundContext, ServerState, Strategy,
                                     Task, task_for, weighted_mean)
from testbed.algorithms.fedavg import mean_metric, proximal_drift
from testbed.algorithms.ratios import PUCBV, RatioPolicy, observe_arrivals, select_with_ratios
from testbed.local import LocalSGD
from testbed.payload import Dense, UnitMasked
from testbed.submodel import SubmodelCosts, keep_count

SCORE = "score:"  # prefix of the importance scores among the tensors a device trains


def top_units(scores: torch.Tensor, keep) -> torch.Tensor:
    """0/1 mask of the `keep` largest scores (ties to the lower index); `keep` may be a 0-d tensor, so this runs
    under vmap with a different count per client."""
    order = torch.argsort(-scores, stable=True)
    return (torch.argsort(order) < keep).to(scores.dtype)


def _rows(mask: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A unit mask shaped to broadcast over its weight's rows."""
    return mask.reshape(-1, *([1] * (like.dim() - 1)))


@dataclass(frozen=True)
class FedLPS(Strategy):
    client: LocalSGD
    costs: SubmodelCosts = field(compare=False, repr=False)
    ratios: RatioPolicy = field(default_factory=PUCBV)
    mu: float = 1.0                  # weight of L_pr (paper: 1; the code: none)
    lam: float = 1.0                 # weight of L_ir
    code_faithful: bool = False
    down: Dense = field(default_factory=Dense)
    up_dtype: str = "float32"

    def init(self, params: Params) -> ServerState:
        return ServerState(params)

    def configure(self, state: ServerState, ctx: RoundContext, rng: np.random.Generator) -> list[Task]:
        tasks = []
        for d, ratio in select_with_ratios(self.ratios, state.clients, ctx, rng):
            scores = None if self.code_faithful else state.clients.get(d, {}).get("scores")
            if scores is None:  # sorted normals: the first mask is the ordered one
                scores = {n: torch.from_numpy(-np.sort(-ctx.strategy_rng.standard_normal(units))).float()
                          for n, units in self.costs.units.items()}
            keep = {n: keep_count(units, ratio) for n, units in self.costs.units.items()}
            masks = {n: top_units(scores[n], keep[n]).bool() for n in keep}
            tasks.append(task_for(d, ctx, self.client, self.down, UnitMasked(masks, self.up_dtype), ratio=ratio,
                                  forward_flops=self.costs.forward_flops(masks, structured=False),
                                  extras={"keep": {name: torch.tensor(k) for name, k in keep.items()}},
                                  local={SCORE + name: q for name, q in scores.items()}))
        return tasks

    def start(self, task: Task, received: Params) -> tuple[Params, None]:
        """The device trains its importance scores along with the model."""
        return received | task.local, None

    def objective(self, loss_fn: LossFn):
        names, mu, lam, faithful = list(self.costs.units), self.mu, self.lam, self.code_faithful

        def objective(params, anchor, x, y, extras):
            weights = {n: p for n, p in params.items() if not n.startswith(SCORE)}
            masked, freeze, importance = dict(weights), {}, 0.0
            for name in names:
                w, q = weights[name], params[SCORE + name]
                m = top_units(q.detach(), extras["keep"][name])
                gate = m if faithful else m + (q - q.detach())   # straight-through: forward exactly m, backward 1
                masked[name] = w * _rows(gate, w)
                freeze[name] = _rows(m, w)
                if faithful:
                    freeze[SCORE + name] = m
                target = torch.sigmoid((w.detach() * _rows(m, w)).abs().flatten(1).sum(1))
                importance = importance + (q - target).square().mean()
            loss, accuracy = loss_fn(masked, x, y)
            loss = loss + lam * importance
            if mu and not faithful:
                loss = loss + mu * proximal_drift(weights, anchor)
            return loss, {"accuracy": accuracy, "update_mask": freeze}

        return objective

    def finish(self, task: Task, trained: Params, received: Params, stats: dict[str, float],
               opt_state: Params) -> Result:
        scores = {n: trained[SCORE + n] for n in self.costs.units}
        masks = {n: top_units(q, int(task.extras["keep"][n])) for n, q in scores.items()}
        personal = {n: trained[n] * _rows(masks[n], trained[n]) if n in masks else trained[n] for n in received}
        delta = {n: trained[n] - received[n] for n in received}
        update = {n: d * _rows(masks[n], d) if n in masks else d for n, d in delta.items()}
        return Result(update, stats, {"scores": scores, "model": personal},
                      up=UnitMasked({n: m.bool() for n, m in masks.items()}, self.up_dtype))

    def aggregate(self, state: ServerState, round: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict[str, float]]:
        if not arrivals:
            return state, {}
        delta = weighted_mean([a.update for a in arrivals], [a.num_samples for a in arrivals])
        params = {n: state.params[n] + delta[n] for n in state.params}
        for a in arrivals:
            state.clients[a.device] = state.clients.get(a.device, {}) | a.local_state
        observe_arrivals(self.ratios, state.clients, round, arrivals)
        return ServerState(params, state.optimizer, state.clients), {"train_loss": mean_metric(arrivals, "train_loss")}

    def personal_models(self, state: ServerState) -> dict[int, Params]:
        return {d: state.clients[d]["model"] for d in state.clients if "model" in state.clients[d]}
