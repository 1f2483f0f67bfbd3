"""Local training, written once for every executor.

A strategy supplies an objective (params, anchor, x, y, extras) -> (loss, aux) and a local optimizer (elementwise
pure rules from rules.py); this module supplies the minibatch schedule and two loops that apply them: one client at
a time (serial executor) or many clients stacked along a leading dimension (batched executor, torch.func.vmap).
Both loops draw each epoch's sample order from the client's own (device, round) generator, so they train on
the same minibatches in the same order.

Per-client inputs travel in `extras`, a dict of tensors (stacked per client under vmap): the objective reads
what it needs (a submodel's mask, say). Its `aux` is a dict of tensors: `accuracy` (the minibatch's, averaged
into the round's train accuracy, P-UCBV's a_k^r) and optionally `update_mask` ({parameter name: 0/1 tensor}),
which keeps the masked entries at their values through this step (weight decay and momentum included), as FedLPS
restores pruned weights after each step; the objective computes it, so a mask may change from step to step.
A client's optimizer state (momentum, moments) can be given and is returned, so a strategy can keep it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch.func import grad_and_value, vmap

from testbed import rules
from testbed.functional import Params

Objective = Callable[[Params, Params, torch.Tensor, torch.Tensor, dict], tuple[torch.Tensor, dict]]
Trained = tuple[Params, dict[str, float], Params]  # parameters, {train_loss, train_accuracy}, optimizer state


@dataclass(frozen=True)
class LocalSchedule:
    """What every local optimizer shares: a learning rate and the minibatch schedule, `local_epochs` passes over
    the client's data or, when `local_steps` is set, exactly that many minibatches (passes repeated as needed, for
    papers that count local iterations, e.g. FedAdam-SSM's 30)."""

    lr: float
    local_epochs: int = 1
    batch_size: int = 10
    local_steps: int | None = None
    clip_norm: float | None = None   # each step's gradients clipped to this global L2 norm (rules.clip_by_norm)

    def clipped(self, grads: Params, clients: bool = False) -> Params:
        return grads if self.clip_norm is None else rules.clip_by_norm(grads, self.clip_norm, clients)

    def batch_sizes(self, num_samples: int) -> list[int]:
        epoch = [min(self.batch_size, num_samples - start) for start in range(0, num_samples, self.batch_size)]
        return epoch * self.local_epochs if self.local_steps is None else \
            (epoch * math.ceil(self.local_steps / len(epoch)))[: self.local_steps]

    def samples_processed(self, num_samples: int) -> int:
        """What the device computes on (its FLOPs follow from it)."""
        return sum(self.batch_sizes(num_samples))

    def schedule(self) -> dict:
        """This learning rate and minibatch schedule as keyword arguments, to build a local optimizer of another
        kind on the same schedule (FedAdam-SSM's local Adam from the `client:` section's SGD)."""
        return {f: getattr(self, f) for f in LocalSchedule.__dataclass_fields__}


@dataclass(frozen=True)
class LocalSGD(LocalSchedule):
    """Minibatch SGD as torch.optim.SGD defines it."""

    momentum: float = 0.0
    weight_decay: float = 0.0

    def init(self, params: Params) -> Params:
        """Momentum buffers "m:<name>" start at zero: torch's first step (buffer = gradient) is then the same."""
        return {f"m:{n}": torch.zeros_like(p) for n, p in params.items()} if self.momentum else {}

    def step(self, params: Params, grads: Params, state: Params) -> tuple[Params, Params]:
        if next(iter(params.values())).is_cuda:
            return self._step_foreach(params, grads, state)
        new, buffers = {}, {}
        for n, p in params.items():
            new[n], buffers[f"m:{n}"] = rules.sgd(p, grads[n], state.get(f"m:{n}"), self.lr, self.momentum,
                                                  self.weight_decay)
        return new, (buffers if self.momentum else {})

    def _step_foreach(self, params: Params, grads: Params, state: Params) -> tuple[Params, Params]:
        """rules.sgd on every tensor at once with torch's foreach kernels, as torch.optim.SGD does on a GPU: a
        few launches a step instead of two to four a tensor, which on a GPU cost more than a small model's
        arithmetic. The same rule; the last bit may differ (a fused multiply-add), so the CPU keeps the loop above
        and its tables."""
        names = list(params)
        p, g = [params[n] for n in names], [grads[n] for n in names]
        if self.weight_decay:
            g = torch._foreach_add(g, p, alpha=self.weight_decay)
        buffers = {}
        if self.momentum:
            g = torch._foreach_add(torch._foreach_mul([state[f"m:{n}"] for n in names], self.momentum), g)
            buffers = {f"m:{n}": b for n, b in zip(names, g)}
        return dict(zip(names, torch._foreach_add(p, g, alpha=-self.lr))), buffers


@dataclass(frozen=True)
class LocalAdam(LocalSchedule):
    """Minibatch Adam, torch.optim.Adam with the defaults and the papers' variants with the flags (rules.adam).

    State: a flat dict of tensors, so train_stacked can stack it per client and hand it back per client:
    "m:<name>", "v:<name>" (first and second moments), "vmax:<name>" (AMSGrad's maximum, only with amsgrad) and
    "step" (steps taken, a 0-d float64 tensor, which can also be averaged across clients). All start at zero as in
    torch; pack() builds a state from given moments (a device resuming its own, or a server's global M and V).
    Two optional entries, carried when present: "shift:<name>", a constant added to every step's direction
    (x -= lr (D + shift): FAdamET's correction y - y_i, applied after the moments), and "gsum:<name>", the
    gradients summed over the steps (FAdamGT's y_i is their mean). And "beta2", a 0-d tensor that overrides the
    field for this client: 1.0 keeps v fixed (1-bit Adam's frozen variance after its warm-up)."""

    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0
    decoupled: bool = False  # AdamW's decoupled weight decay; else L2 added to the gradient
    bias_correction: bool = True
    amsgrad: bool = False
    eps_inside_sqrt: bool = False  # sqrt(v + eps), FedAdam-SSM's eq. 5; else sqrt(v) + eps as torch

    def init(self, params: Params) -> Params:
        zeros = {n: torch.zeros_like(p) for n, p in params.items()}
        return self.pack(zeros, zeros, zeros if self.amsgrad else None)

    def pack(self, m: Params, v: Params, vmax: Params | None = None, step: float | torch.Tensor = 0.0) -> Params:
        """The state for moments m, v (and vmax, needed with amsgrad: FAdamGT starts it at v each round) after
        `step` steps."""
        if self.amsgrad and vmax is None:
            raise ValueError("amsgrad needs vmax (torch starts it at zero; FAdamGT at v)")
        device = next(iter(m.values())).device if m else None
        state = {f"m:{n}": t for n, t in m.items()} | {f"v:{n}": t for n, t in v.items()}
        if self.amsgrad:
            state |= {f"vmax:{n}": t for n, t in vmax.items()}
        return state | {"step": torch.as_tensor(step, dtype=torch.float64, device=device)}

    @staticmethod
    def unpack(state: Params) -> dict[str, Params | torch.Tensor]:
        """{"m": {name: tensor}, "v": {...}, "vmax": {...} (empty without amsgrad), "step": tensor}."""
        out: dict = {"m": {}, "v": {}, "vmax": {}, "step": state["step"]}
        for key, t in state.items():
            if ":" in key:
                kind, name = key.split(":", 1)
                out.setdefault(kind, {})[name] = t
        return out

    def step(self, params: Params, grads: Params, state: Params) -> tuple[Params, Params]:
        t = state["step"] + 1
        new, new_state = {}, {"step": t}
        if "beta2" in state:
            if self.bias_correction:
                raise ValueError("LocalAdam: a per-client beta2 needs bias_correction=False")
            new_state["beta2"] = state["beta2"]
        for n, p in params.items():
            vmax = state[f"vmax:{n}"] if self.amsgrad else None
            beta2 = rules.per_client(state["beta2"], p) if "beta2" in state else self.beta2
            new[n], m, v, vmax = rules.adam(p, grads[n], state[f"m:{n}"], state[f"v:{n}"], vmax, t, self.lr,
                                            self.beta1, beta2, self.eps, self.weight_decay, self.decoupled,
                                            self.bias_correction, self.amsgrad, self.eps_inside_sqrt)
            new_state[f"m:{n}"], new_state[f"v:{n}"] = m, v
            if self.amsgrad:
                new_state[f"vmax:{n}"] = vmax
            if f"shift:{n}" in state:
                new[n] = new[n] - self.lr * state[f"shift:{n}"]
                new_state[f"shift:{n}"] = state[f"shift:{n}"]
            if f"gsum:{n}" in state:
                new_state[f"gsum:{n}"] = state[f"gsum:{n}"] + grads[n]
        return new, new_state


@dataclass(frozen=True)
class LocalDualAveraging(LocalSchedule):
    """FedDA's client (Jin et al. 2022, as FedLion's released code runs FedDA+SGDwM): plain SGD on the model, while
    an EMA momentum m <- beta m + (1 - beta) g is summed into P <- P + m, which is what the server steps with.
    State: "m:<name>" (starts at the server's momentum) and "P:<name>" (starts at zero)."""

    beta: float = 0.9

    def init(self, params: Params) -> Params:
        return {f"{part}:{n}": torch.zeros_like(p) for part in ("m", "P") for n, p in params.items()}

    def step(self, params: Params, grads: Params, state: Params) -> tuple[Params, Params]:
        new, new_state = {}, {}
        for n, p in params.items():
            m = self.beta * state[f"m:{n}"] + (1 - self.beta) * grads[n]
            new[n], new_state[f"m:{n}"], new_state[f"P:{n}"] = p - self.lr * grads[n], m, state[f"P:{n}"] + m
        return new, new_state


@dataclass(frozen=True)
class LocalLion(LocalSchedule):
    """Minibatch Lion (rules.lion: Chen et al. 2023; FedLion's local step with weight_decay 0).

    State: {"m:<name>": momentum}, zeros at the start as in FedLion's m_0 = 0; pack() builds one from a given
    momentum (FedLion's clients start each round from the server's averaged momentum)."""

    beta1: float = 0.9
    beta2: float = 0.99
    weight_decay: float = 0.0  # decoupled: param -= lr * wd * param

    def init(self, params: Params) -> Params:
        return self.pack({n: torch.zeros_like(p) for n, p in params.items()})

    @staticmethod
    def pack(m: Params) -> Params:
        return {f"m:{n}": t for n, t in m.items()}

    @staticmethod
    def unpack(state: Params) -> dict[str, Params]:
        """{"m": {name: tensor}}."""
        return {"m": {key.split(":", 1)[1]: t for key, t in state.items()}}

    def step(self, params: Params, grads: Params, state: Params) -> tuple[Params, Params]:
        new, new_state = {}, {}
        for n, p in params.items():
            new[n], new_state[f"m:{n}"] = rules.lion(p, grads[n], state[f"m:{n}"], self.lr, self.beta1, self.beta2,
                                                     self.weight_decay)
        return new, new_state


def minibatches(num_samples: int, cfg: LocalSchedule, rng: np.random.Generator) -> list[torch.Tensor]:
    """The client's minibatches, epoch after epoch, each epoch in a fresh random order (cut at cfg.local_steps)."""
    count = len(cfg.batch_sizes(num_samples))
    epochs = math.ceil(count / math.ceil(num_samples / cfg.batch_size))
    return [batch for _ in range(epochs)
            for batch in torch.from_numpy(rng.permutation(num_samples)).split(cfg.batch_size)][:count]


def on_device(batches: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    """The minibatches' indices moved to `device` in one copy (a GPU would otherwise copy each step's indices from
    the host, a synchronous copy per step); the same tensors on the CPU."""
    if device.type == "cpu" or not batches:
        return batches
    return list(torch.cat(batches).to(device).split([len(b) for b in batches]))


def _frozen(old: Params, new: Params, aux: dict) -> Params:
    """`new`, except where aux['update_mask'] is 0: there the entry keeps its `old` value, exactly."""
    mask = aux.get("update_mask", {})
    return {n: old[n] + mask[n] * (v - old[n]) if n in mask else v for n, v in new.items()}


def _tree(tree, fn):
    """fn applied to every tensor of a nested dict."""
    return {k: _tree(v, fn) if isinstance(v, dict) else fn(v) for k, v in tree.items()}


def _stack(trees: list[dict]) -> dict:
    """One nested dict of tensors per client -> one nested dict of tensors stacked on a client dimension."""
    return {k: _stack([t[k] for t in trees]) if isinstance(trees[0][k], dict) else torch.stack([t[k] for t in trees])
            for k in trees[0]}


def train_one(objective: Objective, params: Params, x: torch.Tensor, y: torch.Tensor, cfg: LocalSchedule,
              rng: np.random.Generator, extras: dict | None = None, state: Params | None = None) -> Trained:
    """Train one client from `params` (also the anchor).

    Gradients come from plain autograd here: torch.func's transforms cost about 1.4x per step on small
    models (benchmarks/RESULTS.md) and are only needed to vmap over clients."""
    extras = extras or {}
    anchor, losses, accuracies = params, [], []
    state = cfg.init(params) if state is None else state
    params = {n: p.detach().requires_grad_() for n, p in params.items()}
    for batch in on_device(minibatches(len(y), cfg, rng), y.device):
        loss, aux = objective(params, anchor, x[batch], y[batch], extras)
        grads = cfg.clipped(dict(zip(params, torch.autograd.grad(loss, list(params.values())))))
        with torch.no_grad():
            new, state = cfg.step(params, grads, state)
            new = _frozen(params, new, aux)
        params = {n: p.requires_grad_() for n, p in new.items()}
        losses.append(loss.detach())
        accuracies.append(aux["accuracy"].detach())
    # read once, after the last step: on a GPU a read each step would wait for it (the same floats as .item())
    losses, accuracies = torch.stack(losses).tolist(), torch.stack(accuracies).tolist()
    stats = {"train_loss": float(np.mean(losses)), "train_accuracy": float(np.mean(accuracies)),
             "train_loss_sq": math.sqrt(float(np.mean(np.square(losses))))}  # Oort's utility (selection/oort.py)
    return {n: p.detach() for n, p in params.items()}, stats, state


def train_stacked(objective: Objective, params: list[Params], xs: list[torch.Tensor], ys: list[torch.Tensor],
                  cfg: LocalSchedule, rngs: list[np.random.Generator], extras: list[dict] | None = None,
                  states: list[Params | None] | None = None) -> list[Trained]:
    """Train several clients together: parameters stacked on a leading client dimension, one vmapped gradient
    per step for all clients whose minibatch has the same size. Clients that run out of minibatches stop
    changing; nothing is padded, so batch statistics (BatchNorm without running statistics) stay exact."""
    n_clients = len(params)
    extras = extras or [{} for _ in params]
    states = [cfg.init(p) if s is None else s for p, s in zip(params, states or [None] * n_clients)]
    schedules = [minibatches(len(y), cfg, rng) for y, rng in zip(ys, rngs)]
    stacked, state, extra = _stack(params), _stack(states), _stack(extras)
    anchor = stacked
    step = vmap(grad_and_value(objective, has_aux=True))
    device = ys[0].device
    data_x, data_y = torch.cat(xs), torch.cat(ys)   # every client's samples, gathered once a step below
    offsets = np.cumsum([0] + [len(y) for y in ys[:-1]])
    rows_of, gathers = [], []   # per step and minibatch size: which clients, and their samples' rows in data_x
    for t in range(max(len(s) for s in schedules)):
        by_size: dict[int, list[int]] = {}
        for client, schedule in enumerate(schedules):
            if t < len(schedule):
                by_size.setdefault(len(schedule[t]), []).append(client)
        for clients in by_size.values():
            rows_of.append(clients)
            gathers.append(torch.cat([schedules[c][t] + int(offsets[c]) for c in clients]))
    # one copy of every step's rows to the device (per-step host-to-device copies would each wait on a GPU)
    rows_dev = on_device([torch.tensor(clients) for clients in rows_of], device)
    gathers = on_device(gathers, device)
    losses_of, accuracies_of = [], []   # read once at the end: on a GPU a read each step would wait for it
    for clients, rows, gather in zip(rows_of, rows_dev, gathers):
        everyone = len(clients) == n_clients
        take = (lambda tree: tree) if everyone else (lambda tree: _tree(tree, lambda v: v[rows]))
        x = data_x[gather].unflatten(0, (len(clients), -1))
        y = data_y[gather].unflatten(0, (len(clients), -1))
        grads, (losses, aux) = step(take(stacked), take(anchor), x, y, take(extra))
        old = take(stacked)
        new, new_state = cfg.step(old, cfg.clipped(grads, clients=True), take(state))
        new = _frozen(old, new, aux)
        if everyone:
            stacked, state = new, new_state
        else:
            stacked = {n: v.index_copy(0, rows, new[n]) for n, v in stacked.items()}
            state = {n: v.index_copy(0, rows, new_state[n]) for n, v in state.items()}
        losses_of.append(losses.detach())
        accuracies_of.append(aux["accuracy"].detach())
    loss_sums, square_sums, accuracy_sums = [0.0] * n_clients, [0.0] * n_clients, [0.0] * n_clients
    steps = [0] * n_clients
    all_losses = torch.cat(losses_of).tolist()
    all_accuracies = torch.cat(accuracies_of).tolist()
    clients_each = [c for clients in rows_of for c in clients]
    for client, loss, accuracy in zip(clients_each, all_losses, all_accuracies):
        loss_sums[client] += loss
        square_sums[client] += loss * loss
        accuracy_sums[client] += accuracy
        steps[client] += 1
    return [({n: v[i] for n, v in stacked.items()},
             {"train_loss": loss_sums[i] / steps[i], "train_accuracy": accuracy_sums[i] / steps[i],
              "train_loss_sq": math.sqrt(square_sums[i] / steps[i])},
             {n: v[i] for n, v in state.items()})
            for i in range(n_clients)]
