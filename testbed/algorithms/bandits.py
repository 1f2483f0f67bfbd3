"""Interval bandits over the sparse-ratio space: the arms, the splitting and the UCB-V index of P-UCBV.

Paper: Xue et al., "Learnable Sparse Customization in Heterogeneous Edge Computing" (FedLPS), Alg. 2 and eq. 16-17;
the same machinery serves FedMP's E-UCB (Jiang et al., ICDE'22) as the FedLPS authors re-implemented it.
Update rule (one agent per device; arms S^i = half-open sub-intervals [lo, hi) of a ratio range):
    split the arm holding the last ratio s at s:  S' = [lo, s), S'' = [s, hi)     (both inherit the history)
    g_i = mean of arm i's rewards, v_i = their population variance, h_i = their number    (eq. 16)
    U(S_i) = g_i + sqrt( rho (v_i + 2) L / (4 (h_i + 1)) ),  bonus 0 when L <= 0                  (eq. 17)
    exploration "paper": L = log(xi psi eps), psi = xi / I^2 with I = the number of arms, eps halved at every
        observation (Alg. 2 l.6-7). With xi = 10 that is log(1000 eps / I^2): at most log(1000 / 25) after the
        first observation and negative from about the third (eps = 1/4, I >= 6 arms), so the bonus vanishes and
        the index is the mean: mean-greedy plus epsilon-greedy 1/m, which is also what the authors' code does.
    exploration "ucbv": L = log(m + 1), m the device's completed selections: the exploration function of UCB-V
        (Audibert, Munos and Szepesvari, TCS 2009: log t), which stays positive and grows, so an arm little tried
        keeps a bonus.
    next arm = argmax U (or, epsilon-greedy, a uniform arm with probability 1/m); s ~ Uniform(arm)
Deviations and choices:
  - An arm that holds no reward has mean 0 and variance 0. The authors' code seeds every reward list with 0.0 and
    averages it in forever; the paper's eq. 16 averages the h real rewards only, which we follow.
  - A child created by a split copies its parent's reward history (as the code does; the paper is silent), so
    h counts inherited rewards too.
  - Ties in the index are broken uniformly at random (the code takes np.argmax, the lowest interval). In P-UCBV the
    two children of a split get the same history and the same new reward, so they always tie; lowest-first then
    keeps drawing from the lower child and drifts the ratio down to the arm's lower end, a bias toward cheaper
    ratios that no reward asked for.
  - Reward statistics are kept as running sums (Welford: pulls, mean, M2) instead of lists: same mean and
    population variance, and a split copies three numbers.
  - A split at the lower end of an arm (s == lo) would leave an empty interval: the arm is then kept whole.
The policy layer (what reward, which children get it, elimination) is testbed/algorithms/ratios.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Interval = tuple[float, float]


def uniform_intervals(low: float, high: float, n: int) -> tuple[Interval, ...]:
    """n equal half-open partitions of [low, high): np.linspace(low, high, n + 1), as the code builds them."""
    if not (n >= 1 and low < high):
        raise ValueError(f"need n >= 1 and low < high, got n={n}, [{low}, {high})")
    edges = np.linspace(low, high, n + 1)
    return tuple((float(a), float(b)) for a, b in zip(edges[:-1], edges[1:]))


def find_interval(intervals: tuple[Interval, ...] | list[Interval], value: float) -> int:
    """Index of the interval [lo, hi) that holds value."""
    for i, (lo, hi) in enumerate(intervals):
        if lo <= value < hi:
            return i
    raise ValueError(f"{value} lies in no interval of {list(intervals)}")


def split_interval(intervals: tuple[Interval, ...], value: float) -> tuple[Interval, ...]:
    """Replace the interval [lo, hi) that holds value by [lo, value) and [value, hi); kept whole if value == lo."""
    i = find_interval(intervals, value)
    lo, hi = intervals[i]
    middle = ((lo, hi),) if value == lo else ((lo, value), (value, hi))
    return tuple(intervals[:i]) + middle + tuple(intervals[i + 1:])


EXPLORATIONS = ("paper", "ucbv")


def exploration_log(exploration: str, xi: float, arms: int, eps: float, observations: int) -> float:
    """L of eq. 17: the paper's log(xi psi eps) with psi = xi / I^2, or UCB-V's log(m + 1)."""
    if exploration == "paper":
        return math.log(xi * (xi / arms ** 2) * eps)
    if exploration == "ucbv":
        return math.log(observations + 1)
    raise ValueError(f"unknown exploration {exploration!r}; choose one of: {', '.join(EXPLORATIONS)}")


def ucbv_index(mean: float, variance: float, pulls: int, log_term: float, rho: float) -> float:
    """Eq. 17: mean + sqrt(rho (variance + 2) L / (4 (pulls + 1))); no bonus when L <= 0."""
    if log_term <= 0:
        return mean
    return mean + math.sqrt(rho * (variance + 2.0) * log_term / (4.0 * (pulls + 1)))


def explore_probability(observations: int) -> float:
    """The authors' epsilon-greedy rate ep = 1/m (m = completed selections); 1 for the first two draws."""
    return 1.0 if observations <= 1 else 1.0 / observations


@dataclass
class Arm:
    """An interval [lo, hi) and the running statistics of its rewards (Welford: pulls, mean, sum of squared
    deviations), which is all eq. 16-17 read from the reward list."""

    lo: float
    hi: float
    pulls: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, reward: float) -> None:
        self.pulls += 1
        step = reward - self.mean
        self.mean += step / self.pulls
        self.m2 += step * (reward - self.mean)

    def stats(self) -> tuple[float, float, int]:
        """(mean, population variance, pulls) of eq. 16; (0, 0, 0) for an arm without rewards."""
        return (self.mean, self.m2 / self.pulls, self.pulls) if self.pulls else (0.0, 0.0, 0)

    def child(self, lo: float, hi: float) -> "Arm":
        """A sub-interval that inherits this arm's reward history."""
        return Arm(lo, hi, self.pulls, self.mean, self.m2)


@dataclass
class Agent:
    """One device's bandit: its arms and schedule. Plain values only, so it pickles (and spills to a ClientStore)."""

    arms: list[Arm]
    eps: float = 1.0                     # epsilon_r of Alg. 2, eps_0 = 1, halved at every observation
    observations: int = 0                # m: completed selections (observe calls)
    ratio: float | None = None           # the bandit's current ratio s_k (before any capability cap);
                                         # None: draw a new one at the next choose
    last_accuracy: float | None = None   # a_k^{r-1} for the next observation (P-UCBV)
    last_loss: float | None = None       # the previous loss (E-UCB)

    @classmethod
    def fresh(cls, intervals: tuple[Interval, ...]) -> "Agent":
        return cls(arms=[Arm(lo, hi) for lo, hi in intervals])

    def intervals(self) -> tuple[Interval, ...]:
        return tuple((a.lo, a.hi) for a in self.arms)


def nearest_arm(agent: Agent, value: float) -> int:
    """The arm whose interval lies closest to value (the lower one on a tie): for a ratio no arm holds."""
    gaps = [max(arm.lo - value, value - arm.hi, 0.0) for arm in agent.arms]
    return int(np.argmin(gaps))


def split_arm(agent: Agent, value: float) -> tuple[int | None, int]:
    """Split agent's arm that holds value at value (children inherit the history). Returns (lower, upper) arm
    indices after the split; lower is None when the arm was kept whole (value == lo)."""
    i = find_interval(agent.intervals(), value)
    parent = agent.arms[i]
    if value == parent.lo:
        return None, i
    agent.arms[i:i + 1] = [parent.child(parent.lo, value), parent.child(value, parent.hi)]
    return i, i + 1


def index_values(agent: Agent, xi: float, rho: float, exploration: str = "paper") -> np.ndarray:
    """Eq. 17's index of every arm of the agent, as its next selection reads them."""
    log_term = exploration_log(exploration, xi, len(agent.arms), agent.eps, agent.observations)
    return np.array([ucbv_index(*arm.stats(), log_term=log_term, rho=rho) for arm in agent.arms])


def select_arm(agent: Agent, xi: float, rho: float, epsilon_greedy: bool, rng: np.random.Generator,
               exploration: str = "paper") -> int:
    """Alg. 2 l.10: argmax of eq. 17 over the arms. The first draw (m = 0) picks a uniform arm (the paper's random
    initial partition); with epsilon_greedy a uniform arm replaces the argmax w.p. 1/m."""
    n = len(agent.arms)
    if agent.observations == 0 or (epsilon_greedy and rng.random() < explore_probability(agent.observations)):
        return int(rng.integers(n))
    scores = index_values(agent, xi, rho, exploration)
    best = np.flatnonzero(scores == scores.max())
    return int(best[0]) if len(best) == 1 else int(rng.choice(best))


def sample_in(arm: Arm, rng: np.random.Generator) -> float:
    """Alg. 2 l.11: a ratio uniform in [lo, hi) (rounding kept below hi so the arm still holds it)."""
    return min(arm.lo + (arm.hi - arm.lo) * float(rng.random()), float(np.nextafter(arm.hi, arm.lo)))
