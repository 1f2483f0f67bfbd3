"""1-bit Adam and Efficient Adam: Adam with two-way 1-bit compression and error feedback (FedAdam-SSM's baselines).

Papers: Tang et al., "1-bit Adam" (ICML 2021); Chen et al., "Efficient-Adam" (2022); as FedAdam-SSM (Deng et al.)
runs them, digest in specs/fedadam_ssm.md sec. 2 items 6-7 and A7. Both run in rounds of L local steps of the
paper's Adam (no bias correction, eps inside the sqrt; testbed.local.LocalAdam), then compress the round's change:
    device:  y = x + e_n;  send C(y);  e_n <- y - C(y)             (x: the round's change, e_n kept by the device)
    server:  z = mean_n C(y_n) + e_s;  X <- X + C(z);  e_s <- z - C(z);  broadcast C(z)
with C(x) = scale * sign(x) per tensor (payload.Sign; a zero goes to +scale): 1-bit Adam's scale is
||x||_2 / sqrt(numel) (its C), Efficient Adam's mean |x| (the scaled sign that fits x best; the spec's choice).
    1-bit Adam      warm-up (the first 10% of rounds by default): dense FedAdam with moment averaging (W, M, V up
                    and down). Then V is frozen (local steps run with beta2 = 1) and the model change and the first
                    moment's change go through C with their own error feedback, as 1-bit Adam compresses momentum.
    Efficient Adam  each device keeps its own m, v between its rounds (from zero); only the model change goes
                    through C, from the first round.
The downlink is two-way compressed where the paper's devices could use it: a device that took part in the previous
round holds that round's model (and moments), and downloads only C(z), 1 bit an entry, rebuilding X + C(z) exactly
as the server does. Any other device downloads the dense state (the paper has full participation; with partial
participation most downloads are dense, which is the price of compressing the downlink: it says so in bytes_down).
Deviations: the papers communicate every step; here a round's L steps are compressed at once (spec A7's
alternative), and aggregation is by samples, as the rest of the family. Devices keep a copy of what they received.
"""
from __future__ import annotations

from dataclasses import dataclass
import torch

from testbed.algorithms.base import (Arrival, Failure, Params, Result, RoundContext, ServerState, Task,
                                     task_for, weighted_mean)
from testbed.algorithms.fedavg import mean_metric
from testbed.algorithms.moments import MomentAveraging, split_parts
from testbed.local import LocalAdam
from testbed.payload import Dense, Sign, model_shapes, part_of, transmit


def _q(key: str) -> str:
    """The broadcast key of C(z) for a state key: "q:<name>" for the model's, "qm:<name>" for "m:<name>"."""
    return "q" + key if ":" in key else "q:" + key


def _with_feedback(codec: Sign, change: Params, error: Params) -> tuple[Params, Params, Params]:
    """Error feedback, the same on a device and on the server: y = change + e, sent C(y), e' = y - C(y);
    returns (y, C(y), e')."""
    y = {k: t + error.get(k, 0.0) for k, t in change.items()}
    sent = transmit(codec, y, model_shapes(codec, y))
    return y, sent, {k: y[k] - sent[k] for k in y}


@dataclass(frozen=True)
class ErrorFeedbackAdam(MomentAveraging):
    client: LocalAdam
    up: Sign                   # C on the compressed parts (the model's "" and, for 1-bit Adam, "m")
    warmup_rounds: int = 0     # rounds of dense FedAdam with moment averaging before compressing (1-bit Adam)
    local_moments: bool = False   # Efficient Adam: each device's own m, v; else the global M, V travel (1-bit Adam)

    @property
    def PARTS(self) -> tuple[str, ...]:  # the optimizer state the server keeps and broadcasts
        return () if self.local_moments else ("m", "v")

    @property
    def delta_down(self) -> Sign:
        """The downlink of a device that holds last round's state: C(z) of every compressed part."""
        return Sign(parts=tuple("q" + part for part in self.up.parts), norm=self.up.norm)

    def broadcast(self, state: ServerState) -> Params:
        return super().broadcast(state) | state.optimizer.get("q", {})

    def configure(self, state: ServerState, ctx: RoundContext, rng) -> list[Task]:
        compressed = ctx.round > self.warmup_rounds
        tasks = []
        for d in (int(d) for d in ctx.selected):
            kept = state.clients.get(d, {})
            holds = ctx.round - 1 > self.warmup_rounds and kept.get("round") == ctx.round - 1
            tasks.append(task_for(d, ctx, self.client, self.delta_down if holds else self.down,
                                  self.up if compressed else Dense(self.down_dtype, ("",) + self.PARTS), local=kept))
        return tasks

    def _state(self, task: Task, received: Params) -> Params:
        """The model (and global moments) as the device has them: decoded, or rebuilt from its copy and C(z)."""
        if not any(k.startswith("q:") for k in received):
            return received
        return {k: t + received[_q(k)] if _q(k) in received else t for k, t in task.local["copy"].items()}

    def start(self, task: Task, received: Params) -> tuple[Params, Params]:
        model, parts = split_parts(self._state(task, received))
        if self.local_moments:
            return model, task.local.get("moments") or self.client.init(model)
        moments = self.client.pack({n: parts[f"m:{n}"] for n in model}, {n: parts[f"v:{n}"] for n in model})
        frozen = {"beta2": torch.ones((), dtype=torch.float64)} if task.round > self.warmup_rounds else {}
        return model, moments | frozen

    def finish(self, task: Task, trained: Params, received: Params, stats: dict[str, float],
               opt_state: Params) -> Result:
        held = self._state(task, received)
        change = {k: (trained[k] if ":" not in k else opt_state[k]) - t for k, t in held.items()}
        kept = {"round": task.round, "copy": held}
        if self.local_moments:
            kept["moments"] = opt_state
        if task.round <= self.warmup_rounds:
            return Result(change, stats, kept)
        change = {k: t for k, t in change.items() if part_of(k) in self.up.parts}  # V's is zero: frozen
        y, _, kept["error"] = _with_feedback(self.up, change, task.local.get("error", {}))
        return Result(y, stats, kept)

    def aggregate(self, state: ServerState, round: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict[str, float]]:
        for a in arrivals:
            state.clients[a.device] = a.local_state
        if not arrivals or round <= self.warmup_rounds:
            return super().aggregate(state, round, arrivals, failures)
        mean = weighted_mean([a.update for a in arrivals], [1.0 if self.uniform else a.num_samples for a in arrivals])
        _, sent, error = _with_feedback(self.up, mean, state.optimizer.get("error", {}))
        params = {n: p + sent[n] for n, p in state.params.items()}
        optimizer = {part: {n: t + sent.get(f"{part}:{n}", 0.0) for n, t in state.optimizer[part].items()}
                     for part in self.PARTS}
        optimizer |= {"error": error, "q": {_q(k): t for k, t in sent.items()}}
        return ServerState(params, optimizer, state.clients), {"train_loss": mean_metric(arrivals, "train_loss")}
