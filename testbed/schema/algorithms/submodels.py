"""Submodel methods (FedLPS, FLST, RCR; HeteroFL, FjORD, FedRolex, eFD, FedMP) and their sparse-ratio policies."""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt

from testbed.schema.algorithms.config import AlgorithmConfig
from testbed.schema.common import Capability, Fraction, Strict


# ---- sparse-ratio policies -------------------------------------------------------------------------------
# LevelsUpToCapability's default levels (FedLPS's capability tiers), here without importing it (and torch);
# tests/testbed/test_names.py holds the two equal
FJORD_LEVELS = (0.0625, 0.125, 0.25, 0.5, 1.0)

class _IntervalBandit(Strict):
    """Interval bandits over [low, high] (testbed/algorithms/bandits.py)."""

    low: Capability
    high: Capability = 1.0
    partitions: PositiveInt
    rho: PositiveFloat = 0.5
    xi: PositiveFloat | None = None          # R / (K eps); default: stop.max_rounds / round.clients_per_round
    epsilon_greedy: bool = True
    cap: bool
    # L of eq. 17: "paper" log(xi psi eps), which is negative from about a device's third pick (mean-greedy, as
    # the authors' code), or "ucbv" log(m + 1), UCB-V's schedule, which keeps an exploration bonus
    exploration: Literal["paper", "ucbv"] = "paper"

class PUCBVRatio(_IntervalBandit):
    """FedLPS's P-UCBV bandit, one agent per device (defaults: specs/fedlps.md sec. 6)."""

    kind: Literal["pucbv"]
    low: Capability = 0.5
    partitions: PositiveInt = 5
    delta: float = -0.05
    alpha: NonNegativeFloat = 1.0
    accuracy_scale: PositiveFloat = 1.0
    # a_k^{-1}: "measured", the initial global model's accuracy on the device's training data (the paper), or a
    # number for every device (the authors' code: 0)
    initial_accuracy: Fraction | Literal["measured"] = "measured"
    cap: bool = True


class EUCBRatio(_IntervalBandit):
    """FedMP's E-UCB bandit."""

    kind: Literal["eucb"]
    low: Capability = 0.2
    partitions: PositiveInt = 1
    cap: bool = False


class FixedRatioConfig(Strict):
    kind: Literal["fixed"]
    ratio: Capability = 0.5
    cap: bool = False                        # min(z_k, ratio)


class CapabilityRatioConfig(Strict):
    """s = z_k, the device's capability tier this round."""

    kind: Literal["capability"]


class LevelsRatio(Strict):
    """s uniform among the width levels <= z_k (FjORD)."""

    kind: Literal["levels"]
    levels: list[Capability] = Field(default_factory=lambda: list(FJORD_LEVELS), min_length=1)


Ratio = Annotated[Union[PUCBVRatio, EUCBRatio, FixedRatioConfig, CapabilityRatioConfig, LevelsRatio],
                  Field(discriminator="kind")]


# ---- submodel methods -----------------------------------------------------------------------------------
class FedLPSConfig(AlgorithmConfig):
    """FedLPS: learnable unit patterns at a per-device ratio (P-UCBV by default)."""

    name: Literal["fedlps"]
    ratio: Ratio = PUCBVRatio(kind="pucbv")
    mu: NonNegativeFloat = 1.0               # proximal weight (paper 1; the authors' code 0)
    lam: NonNegativeFloat = 1.0              # importance-regularizer weight
    code_faithful: bool = False              # the authors' code: no task gradient to the scores, no L_pr, fresh scores


class FLSTConfig(FedLPSConfig):
    """FedLPS's ablation: learnable patterns at a fixed ratio 0.5."""

    name: Literal["flst"]
    ratio: Ratio = FixedRatioConfig(kind="fixed", ratio=0.5)


class RCRConfig(FedLPSConfig):
    """FedLPS's ablation: learnable patterns at ratio = capability."""

    name: Literal["rcr"]
    ratio: Ratio = CapabilityRatioConfig(kind="capability")


class PartialConfig(AlgorithmConfig):
    """A structurally shrunk submodel per device: any unit pattern with any ratio policy."""

    name: Literal["partial"]
    pattern: Literal["ordered", "rolling", "random", "magnitude"] = "ordered"
    ratio: Ratio = CapabilityRatioConfig(kind="capability")


class HeteroFLConfig(PartialConfig):
    name: Literal["heterofl"]
    pattern: Literal["ordered"] = "ordered"


class FjORDConfig(PartialConfig):
    name: Literal["fjord"]
    pattern: Literal["ordered"] = "ordered"
    ratio: Ratio = LevelsRatio(kind="levels")


class FedRolexConfig(PartialConfig):
    name: Literal["fedrolex"]
    pattern: Literal["rolling"] = "rolling"


class EFDConfig(PartialConfig):
    name: Literal["efd"]
    pattern: Literal["random"] = "random"


class FedMPConfig(PartialConfig):
    name: Literal["fedmp"]
    pattern: Literal["magnitude"] = "magnitude"
    ratio: Ratio = EUCBRatio(kind="eucb")
