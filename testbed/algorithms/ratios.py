"""Sparse-ratio policies: the ratio s in (0, 1] the server gives each selected device in a round.

Papers: Xue et al., "Learnable Sparse Customization in Heterogeneous Edge Computing" (FedLPS; P-UCBV is its
Alg. 2, eq. 14-17, U from its Sec. V-A); FedMP's E-UCB (Jiang et al., ICDE'22) as the FedLPS authors re-implemented
it (their FedMP.py), since the spec and the FedLPS paper only name it.
One protocol for every submodel method: `choose(device, round, capability, rng) -> s` when a device is selected,
`observe(device, round, ratio, feedback)` when its result arrives (never for a dropped or late device: it keeps
its ratio, as Alg. 1 l.13 keeps s for unselected clients). A policy is a frozen dataclass of constants; the
per-device agents live in `policy.state` (a dict by default; any MutableMapping such as a ClientStore works:
an agent is always written back after a change).
    FixedRatio    s = 0.5 for every device (FLST, CS, FedSpa)
    CapabilityRatio  s = z_k, the device's capability (RCR, HeteroFL, FedRolex, eFD)
    LevelsUpToCapability  s uniform among the width levels <= z_k (FjORD's ordered dropout)
    PUCBV         FedLPS's bandit, one agent per device, s = min(z_k, s_bandit)
    EUCB          FedMP's bandit (uncapped, as its code)
P-UCBV update, on each observation of device k (Alg. 2):
    split the arm S_u holding s_k^r at s_k^r into S' = [lo, s), S'' = [s, hi)   (children copy S_u's rewards)
    if a_k^r - a_k^{r-1} < Delta: remove S' (accuracy-dominated elimination)
    eps <- eps / 2 ; psi = xi / I^2
    T_k = F_hat / F + alpha B_hat / B                                          (eq. 14)
    G = (U(a_k^r) - U(a_k^{r-1})) / T_k,  U(x) = 10 - 20 / (1 + e^{0.35 x})   (eq. 15, Sec. V-A)
    append G to S' (if kept) and S''; the next choose takes argmax of eq. 17 (epsilon-greedy 1/m) and draws
    s uniformly in that arm (testbed/algorithms/bandits.py)
Choices where the paper is silent (spec sec. 6 recommendations): Delta = -0.05, rho = 0.5, I_0 = 5 partitions of
[0.5, 1], alpha = 1, accuracy as a fraction in [0, 1] (accuracy_scale = 100 gives the percent reading), S' = the
lower half, epsilon-greedy on (as the code), random tie-breaking (bandits.py), a_k^{-1} = the paper's: the initial
global model's accuracy on the device's training data, measured before round 1 at no simulated cost (the scenario's
initial_accuracy: a number gives every device that value instead; the authors' code uses 0), eq. 17's exploration
term as written ("paper"; "ucbv" keeps it positive, bandits.py).
The reward goes to the ratio the device trained at, min(z_k, s_k) and any memory cap (Alg. 2 credits s_k^r, the
ratio the client used): the arm holding it is split there. Where no arm holds that ratio (below the arm space, a
device whose capability z_k < low, or in a stretch an elimination removed), the nearest arm gets the reward,
unsplit, as the closest the bandit can choose; no elimination then (there is no lower part).
Deviations from the paper (where spec and paper differ, the paper wins, except where the brief fixes a choice):
  - Arm space: the paper partitions [0, 1); we follow the authors' code and the spec, [0.5, 1] (low/high).
  - a_k^{r-1} is the device's previous accuracy (paper), not the code's max over all past accuracies.
  - Means average the real rewards only (eq. 16), not the code's extra seed 0.0 in every list.
  - The new ratio is drawn at the next choose rather than at the end of observe: nothing this agent reads changes
    in between, and observe needs no random stream.
  - Cost T_k uses the engine's real FLOP/s and uplink bit/s (spec rec.), not the code's per-dataset constants.
E-UCB (FedMP): the same interval bandit on [0.2, 1] starting from one arm, no elimination, no cap, epsilon-greedy,
index eq. 17 with xi = R/(K eps); reward = (loss_before - loss_after) / (mean_time - time), which is exactly the
code's (loss_now - loss_prev) / (time - mean_time): a loss drop on a faster-than-average device pays. (The spec
writes "loss drop / (time - mean time)"; that reads with the opposite sign, we follow the code.) The reward goes
to the upper child [s, hi), the arm the code returns. Not copied from the code: its second E_UCB() call after the
round (which re-samples and re-splits, a bug), its split at choose time (we split when the result arrives, so a
dropped device leaves no trace), and its start loss of 10 (the first observation records no reward instead). A
zero denominator (a device alone in its round, or at exactly the mean) records no reward.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

import numpy as np

from testbed.algorithms.bandits import Agent, nearest_arm, sample_in, select_arm, split_arm, uniform_intervals
from testbed.algorithms.base import Arrival, RoundContext

__all__ = ["select_with_ratios", "observe_arrivals", "Feedback", "RatioPolicy", "FixedRatio", "CapabilityRatio",
           "LevelsUpToCapability", "PUCBV", "EUCB", "utility", "local_cost",
           "pucbv_reward", "eucb_reward", "xi_for", "feedback_of", "with_agents_in"]


@dataclass(frozen=True)
class Feedback:
    """What a device's round tells the ratio policy. Each policy reads only its own fields; None = not given.

    P-UCBV:
      accuracy           a_k^r, the device's mean training accuracy over its local epochs this round, in [0, 1]
      previous_accuracy  optional override of a_k^{r-1}; by default the agent's own last accuracy, or
                         PUCBV.initial_accuracy on the first observation. Pass the initial global model's accuracy
                         on the device's data here on its first observation to follow the paper exactly.
      flops              F_hat, training FLOPs of the task (at the ratio actually trained)
      flops_per_s        F, the device's compute speed (FLOP/s) this round
      bits_up            B_hat, bits of the encoded upload
      up_bps             B, the device's uplink bandwidth (bit/s)
    E-UCB:
      loss_after         the device's mean training loss this round
      loss_before        optional override of the previous loss; by default the agent's last loss_after
      round_time_s       the device's time on the task (the engine's download + compute + upload; FedMP's code
                         uses compute time only)
      mean_round_time_s  the mean of round_time_s over the devices that reported in the same round
    """

    accuracy: float | None = None
    previous_accuracy: float | None = None
    flops: float | None = None
    flops_per_s: float | None = None
    bits_up: float | None = None
    up_bps: float | None = None
    loss_after: float | None = None
    loss_before: float | None = None
    round_time_s: float | None = None
    mean_round_time_s: float | None = None

    def need(self, *names: str) -> None:
        missing = [n for n in names if getattr(self, n) is None]
        if missing:
            raise ValueError(f"feedback lacks {', '.join(missing)}")


@runtime_checkable
class RatioPolicy(Protocol):
    def choose(self, device: int, round: int, capability: float, rng: np.random.Generator) -> float: ...
    def observe(self, device: int, round: int, ratio: float, feedback: Feedback) -> None: ...


def _check_capability(capability: float) -> float:
    if not 0.0 < capability <= 1.0:
        raise ValueError(f"capability must lie in (0, 1], got {capability}")
    return float(capability)


# ---- pure formulas ------------------------------------------------------------------------------------------
def utility(x: float) -> float:
    """U(x) = 10 - 20 / (1 + e^{0.35 x})  (FedLPS Sec. V-A): odd, U(0) = 0, saturating at +-10."""
    return 10.0 - 20.0 / (1.0 + math.exp(0.35 * x))


def local_cost(flops: float, flops_per_s: float, bits_up: float, up_bps: float, alpha: float = 1.0) -> float:
    """Eq. 14: T_k = F_hat / F + alpha B_hat / B (seconds of compute plus alpha times seconds of upload)."""
    return flops / flops_per_s + alpha * bits_up / up_bps


def pucbv_reward(accuracy: float, previous_accuracy: float, cost: float, accuracy_scale: float = 1.0) -> float:
    """Eq. 15: G = (U(a^r) - U(a^{r-1})) / T_k, with U applied to accuracy_scale * a."""
    return (utility(accuracy_scale * accuracy) - utility(accuracy_scale * previous_accuracy)) / cost


def eucb_reward(loss_before: float, loss_after: float, time_s: float, mean_time_s: float) -> float | None:
    """FedMP's reward: loss drop / (mean time - time); None when the denominator is 0 (undefined)."""
    denominator = mean_time_s - time_s
    if denominator == 0:
        return None
    return (loss_before - loss_after) / denominator


def xi_for(rounds: int, clients_per_round: float) -> float:
    """xi = R / (K eps): rounds over clients selected per round (10 = 100 / 10 in the paper's settings)."""
    return rounds / clients_per_round


# ---- trivial policies ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FixedRatio:
    """The same ratio for every device (FLST, CS, FedSpa: 0.5); cap=True gives min(z_k, ratio)."""

    ratio: float = 0.5
    cap: bool = False

    def choose(self, device: int, round: int, capability: float, rng: np.random.Generator) -> float:
        z = _check_capability(capability)
        return min(z, self.ratio) if self.cap else self.ratio

    def observe(self, device: int, round: int, ratio: float, feedback: Feedback) -> None:
        return None


@dataclass(frozen=True)
class CapabilityRatio:
    """s = z_k, the device's capability this round (RCR, HeteroFL, FjORD, FedRolex, eFD)."""

    def choose(self, device: int, round: int, capability: float, rng: np.random.Generator) -> float:
        return _check_capability(capability)

    def observe(self, device: int, round: int, ratio: float, feedback: Feedback) -> None:
        return None


@dataclass(frozen=True)
class LevelsUpToCapability:
    """s drawn uniformly among the width levels that fit the device, those <= z_k (FjORD's ordered dropout,
    p ~ U(P_k)); the smallest level when none fits. Default levels: FedLPS's capability tiers."""

    levels: tuple[float, ...] = (0.0625, 0.125, 0.25, 0.5, 1.0)

    def choose(self, device: int, round: int, capability: float, rng: np.random.Generator) -> float:
        z = _check_capability(capability)
        fitting = [p for p in self.levels if p <= z] or [min(self.levels)]
        return float(fitting[int(rng.integers(len(fitting)))])

    def observe(self, device: int, round: int, ratio: float, feedback: Feedback) -> None:
        return None


# ---- bandits ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class _IntervalPolicy:
    low: float
    high: float
    partitions: int
    rho: float
    xi: float
    epsilon_greedy: bool
    cap: bool
    exploration: str
    state: MutableMapping[int, Agent] = field(default_factory=dict, compare=False, repr=False)

    def agent(self, device: int) -> Agent:
        device = int(device)
        if device not in self.state:
            self.state[device] = Agent.fresh(uniform_intervals(self.low, self.high, self.partitions))
        return self.state[device]

    def choose(self, device: int, round: int, capability: float, rng: np.random.Generator) -> float:
        z = _check_capability(capability)
        agent = self.agent(device)
        if agent.ratio is None:   # first selection, or a result arrived since the last draw
            arm = select_arm(agent, self.xi, self.rho, self.epsilon_greedy, rng, self.exploration)
            agent.ratio = sample_in(agent.arms[arm], rng)
            self.state[int(device)] = agent
        return min(z, agent.ratio) if self.cap else agent.ratio

    def _pending(self, device: int) -> Agent:
        agent = self.state.get(int(device))
        if agent is None or agent.ratio is None:
            raise ValueError(f"device {device}: observe without a choose since its last observation")
        return agent

    def _close(self, device: int, agent: Agent) -> None:
        agent.eps /= 2.0
        agent.observations += 1
        agent.ratio = None
        self.state[int(device)] = agent


@dataclass(frozen=True, kw_only=True)
class PUCBV(_IntervalPolicy):
    """FedLPS's P-UCBV, one agent per device; see the module docstring for the rule and the choices."""

    low: float = 0.5                 # arm space [low, high] (code); the paper says [0, 1)
    high: float = 1.0
    partitions: int = 5              # I_0
    delta: float = -0.05             # Delta: eliminate S' when a^r - a^{r-1} < delta (accuracy fraction)
    rho: float = 0.5
    xi: float = 10.0                 # R / (K eps), see xi_for
    alpha: float = 1.0               # weight of upload seconds in T_k
    accuracy_scale: float = 1.0      # U reads accuracy_scale * a (1: fraction, as the code; 100: percent)
    initial_accuracy: float = 0.0    # a_k^{-1} of every device, where none was measured (the authors' code: 0)
    # a_k^{-1} per device: the initial global model's accuracy on its training data (the paper), measured before
    # round 1 at no simulated cost (scenario.py's build); None: initial_accuracy for all
    measured_initial_accuracy: np.ndarray | None = field(default=None, compare=False, repr=False)
    epsilon_greedy: bool = True
    cap: bool = True                 # s = min(z_k, s_bandit)
    exploration: str = "paper"       # L of eq. 17: "paper" log(xi psi eps), or "ucbv" log(m + 1) (bandits.py)

    def observe(self, device: int, round: int, ratio: float, feedback: Feedback) -> None:
        """`ratio`: what the device trained at (its draw, capped by capability and memory): the arm holding it is
        split there and credited; below the arm space, the lowest arm is credited whole."""
        feedback.need("accuracy", "flops", "flops_per_s", "bits_up", "up_bps")
        agent = self._pending(device)
        previous = feedback.previous_accuracy
        if previous is None:
            previous = agent.last_accuracy
        if previous is None:
            measured = self.measured_initial_accuracy
            previous = self.initial_accuracy if measured is None else float(measured[device])
        cost = local_cost(feedback.flops, feedback.flops_per_s, feedback.bits_up, feedback.up_bps, self.alpha)
        reward = pucbv_reward(feedback.accuracy, previous, cost, self.accuracy_scale)
        held = any(arm.lo <= ratio < arm.hi for arm in agent.arms)
        lower, upper = split_arm(agent, ratio) if held else (None, nearest_arm(agent, ratio))
        if lower is not None and feedback.accuracy - previous < self.delta:
            del agent.arms[lower]
            lower, upper = None, upper - 1
        for i in (lower, upper):
            if i is not None:
                agent.arms[i].add(reward)
        agent.last_accuracy = float(feedback.accuracy)
        self._close(device, agent)


@dataclass(frozen=True, kw_only=True)
class EUCB(_IntervalPolicy):
    """FedMP's E-UCB as the FedLPS authors' code runs it; see the module docstring."""

    low: float = 0.2
    high: float = 1.0
    partitions: int = 1              # the code's linspace(0.2, 1, 2): a single starting arm
    rho: float = 0.5
    xi: float = 10.0                 # R / (K eps)
    epsilon_greedy: bool = True
    cap: bool = False                # FedMP trains at the bandit's ratio
    exploration: str = "paper"

    def observe(self, device: int, round: int, ratio: float, feedback: Feedback) -> None:
        feedback.need("loss_after", "round_time_s", "mean_round_time_s")
        agent = self._pending(device)
        before = agent.last_loss if feedback.loss_before is None else feedback.loss_before
        _, upper = split_arm(agent, agent.ratio)
        if before is not None:
            reward = eucb_reward(before, feedback.loss_after, feedback.round_time_s, feedback.mean_round_time_s)
            if reward is not None:
                agent.arms[upper].add(reward)
        agent.last_loss = float(feedback.loss_after)
        self._close(device, agent)


# ---- wiring into a strategy ---------------------------------------------------------------------------------
def feedback_of(arrival: Arrival, mean_round_time_s: float) -> Feedback:
    """What an arrival tells a policy. The device's FLOP/s are the clock's (multiply-adds per second of its
    compute phase), so flops / flops_per_s is exactly its compute seconds, and bits_up / up_bps its transfer
    seconds (T_k of eq. 14 leaves the latency out). Under compute: latency the clock's compute seconds are the
    predicted time of the device's steps, so the same formula sees the time the device took: what the server can
    know of a device is what it observed, on either clock (testbed/latency/clock.py)."""
    tl = arrival.timeline
    return Feedback(accuracy=arrival.metrics["train_accuracy"], flops=tl.flops, flops_per_s=tl.flops / tl.seconds[1],
                    bits_up=8 * tl.bytes_up, up_bps=8 * tl.up_Bps, loss_after=arrival.metrics["train_loss"],
                    round_time_s=sum(tl.seconds), mean_round_time_s=mean_round_time_s)


class _Agents(MutableMapping):
    """device -> bandit agent, stored as the 'agent' entry of each device's state in a strategy's client store."""

    def __init__(self, clients: MutableMapping[int, dict]):
        self.clients = clients

    def __getitem__(self, device: int) -> Agent:
        try:
            return self.clients[device]["agent"]
        except KeyError:
            raise KeyError(device) from None

    def __setitem__(self, device: int, agent: Agent) -> None:
        self.clients[device] = self.clients.get(device, {}) | {"agent": agent}  # written back: a store may spill

    def __delitem__(self, device: int) -> None:
        self[device]  # a KeyError when the device has no agent
        self.clients[device] = {k: v for k, v in self.clients[device].items() if k != "agent"}

    def __iter__(self) -> Iterator[int]:
        return (d for d in self.clients if "agent" in self.clients[d])

    def __len__(self) -> int:
        return sum(1 for _ in self)


def with_agents_in(policy: RatioPolicy, clients: MutableMapping[int, dict]) -> RatioPolicy:
    """The policy, its per-device agents kept in `clients` (a strategy's ServerState.clients)."""
    return replace(policy, state=_Agents(clients)) if isinstance(policy, _IntervalPolicy) else policy


def select_with_ratios(policy: RatioPolicy, clients: MutableMapping[int, dict], ctx: RoundContext,
                       rng: np.random.Generator) -> list[tuple[int, float]]:
    """The devices the selection picked (ctx.selected), each with its ratio from the policy at its capability this round (drawn from the strategy's own stream), capped by what fits its memory."""
    policy, tiers = with_agents_in(policy, clients), ctx.fleet.tier_at(ctx.round)
    chosen = [(int(d), policy.choose(int(d), ctx.round, float(tiers[d]), ctx.strategy_rng))
              for d in ctx.selected]
    return chosen if ctx.ratio_cap is None else [(d, min(ratio, float(ctx.ratio_cap[d]))) for d, ratio in chosen]


def observe_arrivals(policy: RatioPolicy, clients: MutableMapping[int, dict], round: int,
                     arrivals: list[Arrival]) -> None:
    """The policy learns from every arrival (dropped and late devices tell it nothing)."""
    policy = with_agents_in(policy, clients)
    mean_time = float(np.mean([sum(a.timeline.seconds) for a in arrivals]))
    for a in arrivals:
        policy.observe(a.device, round, a.task.ratio, feedback_of(a, mean_time))
