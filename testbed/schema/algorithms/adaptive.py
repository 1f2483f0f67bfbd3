"""Adaptive local optimizers with compressed uplinks (FedAdam-SSM and its baselines, FedLion, MFL, FAFED, FedDA,
FAdamGT / FAdamET, LocalAdam, FedLADA) and SCAFFOLD."""
from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat

from testbed.schema.algorithms.config import AlgorithmConfig
from testbed.schema.common import Fraction


# ---- adaptive local optimizers with compressed uplinks ----------------------------------------------------
class FedAdamMomentsConfig(AlgorithmConfig):
    """FedAdam with moment averaging (FedAdam-SSM's Alg. 1): local Adam from the global W, M, V; all three sent
    dense. The client section gives lr, batch_size and local_steps (the paper: 30)."""

    name: Literal["fedadam_moments"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.999
    eps: PositiveFloat = 1e-6


class FedAdamSSMConfig(FedAdamMomentsConfig):
    """FedAdam-SSM: one shared top-k mask (of the model update) for the update and both moments."""

    name: Literal["fedadam_ssm"]
    alpha: Annotated[float, Field(gt=0, le=1)] = 0.05      # k = floor(alpha d)
    SELECT_BY: ClassVar[str | None] = None
    SHARED: ClassVar[bool] = True


class FedAdamTopConfig(FedAdamSSMConfig):
    """FedAdam-Top: three independent top-k masks."""

    name: Literal["fedadam_top"]
    SHARED: ClassVar[bool] = False


class FedAdamSSMMConfig(FedAdamSSMConfig):
    name: Literal["fedadam_ssm_m"]
    SELECT_BY: ClassVar[str | None] = "m"


class FedAdamSSMVConfig(FedAdamSSMConfig):
    name: Literal["fedadam_ssm_v"]
    SELECT_BY: ClassVar[str | None] = "v"


class FairnessTopConfig(FedAdamSSMConfig):
    """One shared mask, fair to the update and both moments (top ceil(k/3) of each, united)."""

    name: Literal["fairness_top"]
    SELECT_BY: ClassVar[str | None] = "fair"


class OneBitAdamConfig(FedAdamMomentsConfig):
    """1-bit Adam: dense FedAdam with moment averaging for `warmup_rounds`, then V frozen and the model's and
    momentum's changes sent as 1-bit signs with an rms scale per tensor and error feedback, both ways."""

    name: Literal["onebit_adam"]
    warmup_rounds: NonNegativeInt | None = None   # default: 10% of stop.max_rounds (the spec's recommendation)


class EfficientAdamConfig(FedAdamMomentsConfig):
    """Efficient Adam: each device's own Adam moments; the model's change sent as 1-bit signs with a mean |x|
    scale per tensor and error feedback, both ways, from the first round."""

    name: Literal["efficient_adam"]


class _FixedLocalSteps(AlgorithmConfig):
    """Methods whose payload or state counts local steps: the Scenario checks that client.local_steps is set."""

    NEEDS_LOCAL_STEPS: ClassVar[bool] = True


class FedLionConfig(_FixedLocalSteps):
    """FedLion: local Lion from the global model and momentum; integer deltas + fp32 momentum uplink."""

    name: Literal["fedlion"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.99


class MFLConfig(AlgorithmConfig):
    """MFL: local heavy-ball SGD from the global model and momentum buffer; both averaged."""

    name: Literal["mfl"]
    momentum: Annotated[float, Field(gt=0, lt=1)] = 0.9   # without it MFL is FedAvg


class FAFEDConfig(_FixedLocalSteps):
    """FAFED as run in FedLion's released code: local AdamW (bias-corrected), x, m, v averaged."""

    name: Literal["fafed"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.99
    eps: PositiveFloat = 1e-6


class FedDAConfig(AlgorithmConfig):
    """FedDA+SGDwM: local SGD, the EMA momentum summed into P; the server steps with eta_g eta_l mean(P)."""

    name: Literal["fedda"]
    beta: Fraction = 0.9
    server_lr: PositiveFloat = 1.0           # eta_g (the code: 1 on EMNIST, 3.3 on CIFAR)


class FAdamGTConfig(AlgorithmConfig):
    """FAdamGT: gradient tracking before the local AMSGrad moments (no bias correction); v_i kept per device."""

    name: Literal["fadamgt"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.99
    eps: PositiveFloat = 1e-8
    weight_decay: NonNegativeFloat = 1e-8
    track_fraction: Annotated[float, Field(gt=0, le=1)] = 0.5   # |Y| / |S|
    server_lr: PositiveFloat = 1.0
    MODE: ClassVar[str] = "gt"


class FAdamETConfig(FAdamGTConfig):
    """FAdamET: estimate tracking, the correction added after the moments."""

    name: Literal["fadamet"]
    MODE: ClassVar[str] = "et"


class LocalAdamConfig(FAdamGTConfig):
    """LocalAdam: FAdamGT's local rule without tracking."""

    name: Literal["localadam"]
    MODE: ClassVar[str] = "none"


class FedLADAConfig(_FixedLocalSteps):
    """FedLADA: local AMSGrad from the averaged vhat, each step blended with the global update estimate."""

    name: Literal["fedlada"]
    alpha: Annotated[float, Field(gt=0, le=1)] = 0.9
    beta1: Fraction = 0.9
    beta2: Fraction = 0.99
    eps: PositiveFloat = 1e-8
    server_lr: PositiveFloat = 1.0


class ScaffoldConfig(AlgorithmConfig):
    """SCAFFOLD (option II): local SGD with control variates, every sampled device updating its own."""

    name: Literal["scaffold"]
    server_lr: PositiveFloat = 1.0
