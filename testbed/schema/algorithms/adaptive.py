"""Adaptive local optimizers with compressed uplinks (FedAdam-SSM and its baselines, FedLion, MFL, FAFED, FedDA,
FAdamGT / FAdamET, LocalAdam, FedLADA) and SCAFFOLD."""
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat

from testbed.schema.algorithms.config import AlgorithmConfig
from testbed.schema.common import Fraction

if TYPE_CHECKING:
    from testbed.algorithms.base import Build


# ---- adaptive local optimizers with compressed uplinks ----------------------------------------------------
class FedAdamMomentsConfig(AlgorithmConfig):
    """FedAdam with moment averaging (FedAdam-SSM's Alg. 1): local Adam from the global W, M, V; all three sent
    dense. The client section gives lr, batch_size and local_steps (the paper: 30)."""

    name: Literal["fedadam_moments"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.999
    eps: PositiveFloat = 1e-6

    def _client(self, b: Build):  # the paper's local Adam: no bias correction, eps inside the sqrt
        from testbed.local import LocalAdam

        return LocalAdam(**b.schedule, beta1=self.beta1, beta2=self.beta2, eps=self.eps, bias_correction=False,
                         eps_inside_sqrt=True)

    def _codec(self, b: Build):
        from testbed.payload import Dense

        return Dense(b.up.dtype, ("", "m", "v"))

    def strategy(self, b: Build):
        from testbed.algorithms import SparseFedAdam

        return SparseFedAdam(self._client(b), self._codec(b), b.down.dtype, fairness=self.name == "fairness_top")


class FedAdamSSMConfig(FedAdamMomentsConfig):
    """FedAdam-SSM: one shared top-k mask (of the model update) for the update and both moments."""

    name: Literal["fedadam_ssm"]
    alpha: Annotated[float, Field(gt=0, le=1)] = 0.05      # k = floor(alpha d)
    SELECT_BY: ClassVar[str | None] = None
    SHARED: ClassVar[bool] = True

    def _codec(self, b: Build):
        from testbed.payload import TopK

        return TopK(self.alpha, ("", "m", "v"), b.up.dtype, shared_mask=self.SHARED, select_by=self.SELECT_BY)


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

    def strategy(self, b: Build):
        from testbed.algorithms import ErrorFeedbackAdam
        from testbed.payload import Sign

        warmup = round(0.1 * b.rounds) if self.warmup_rounds is None else self.warmup_rounds
        return ErrorFeedbackAdam(self._client(b), Sign(parts=("", "m"), norm="rms"), b.down.dtype,
                                 warmup_rounds=warmup)


class EfficientAdamConfig(FedAdamMomentsConfig):
    """Efficient Adam: each device's own Adam moments; the model's change sent as 1-bit signs with a mean |x|
    scale per tensor and error feedback, both ways, from the first round."""

    name: Literal["efficient_adam"]

    def strategy(self, b: Build):
        from testbed.algorithms import ErrorFeedbackAdam
        from testbed.payload import Sign

        return ErrorFeedbackAdam(self._client(b), Sign(norm="mean_abs"), b.down.dtype, local_moments=True)


class _FixedLocalSteps(AlgorithmConfig):
    """Methods whose payload or state counts local steps: the Scenario checks that client.local_steps is set."""

    NEEDS_LOCAL_STEPS: ClassVar[bool] = True


class FedLionConfig(_FixedLocalSteps):
    """FedLion: local Lion from the global model and momentum; integer deltas + fp32 momentum uplink."""

    name: Literal["fedlion"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.99

    def strategy(self, b: Build):
        from testbed.algorithms import FedLion
        from testbed.local import LocalLion
        from testbed.payload import IntegerDelta

        up = IntegerDelta(b.client.local_steps, ("m",), b.up.dtype)
        return FedLion(LocalLion(**b.schedule, beta1=self.beta1, beta2=self.beta2), up, b.down.dtype)


class MFLConfig(AlgorithmConfig):
    """MFL: local heavy-ball SGD from the global model and momentum buffer; both averaged."""

    name: Literal["mfl"]
    momentum: Annotated[float, Field(gt=0, lt=1)] = 0.9   # without it MFL is FedAvg

    def strategy(self, b: Build):
        from testbed.algorithms import MFL
        from testbed.local import LocalSGD
        from testbed.payload import Dense

        return MFL(LocalSGD(**b.schedule, momentum=self.momentum), Dense(b.up.dtype, ("", "m")), b.down.dtype)


class FAFEDConfig(_FixedLocalSteps):
    """FAFED as run in FedLion's released code: local AdamW (bias-corrected), x, m, v averaged."""

    name: Literal["fafed"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.99
    eps: PositiveFloat = 1e-6

    def strategy(self, b: Build):
        from testbed.algorithms import FAFED
        from testbed.local import LocalAdam
        from testbed.payload import Dense

        client = LocalAdam(**b.schedule, beta1=self.beta1, beta2=self.beta2, eps=self.eps, decoupled=True)
        return FAFED(client, Dense(b.up.dtype, ("", "m", "v")), b.down.dtype)


class FedDAConfig(AlgorithmConfig):
    """FedDA+SGDwM: local SGD, the EMA momentum summed into P; the server steps with eta_g eta_l mean(P)."""

    name: Literal["fedda"]
    beta: Fraction = 0.9
    server_lr: PositiveFloat = 1.0           # eta_g (the code: 1 on EMNIST, 3.3 on CIFAR)

    def strategy(self, b: Build):
        from testbed.algorithms import FedDA
        from testbed.local import LocalDualAveraging
        from testbed.payload import Dense

        return FedDA(LocalDualAveraging(**b.schedule, beta=self.beta), Dense(b.up.dtype, ("", "m")), b.down.dtype,
                     server_lr=self.server_lr)


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

    def strategy(self, b: Build):
        from testbed.algorithms import Tracking
        from testbed.local import LocalAdam

        client = LocalAdam(**b.schedule, beta1=self.beta1, beta2=self.beta2, eps=self.eps,
                           weight_decay=self.weight_decay, bias_correction=False, amsgrad=True)
        return Tracking(client, self.MODE, self.track_fraction, self.server_lr, b.fleet_size, b.up.dtype,
                        b.down.dtype)


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

    def strategy(self, b: Build):
        from testbed.algorithms import FedLADA
        from testbed.local import LocalAdam
        from testbed.payload import Dense

        client = LocalAdam(**(b.schedule | {"lr": b.client.lr * self.alpha}), beta1=self.beta1, beta2=self.beta2,
                           eps=self.eps, bias_correction=False, amsgrad=True)
        return FedLADA(client, Dense(b.up.dtype, ("", "v")), b.down.dtype, alpha=self.alpha, local_lr=b.client.lr,
                       local_steps=b.client.local_steps, server_lr=self.server_lr)


class ScaffoldConfig(AlgorithmConfig):
    """SCAFFOLD (option II): local SGD with control variates, every sampled device updating its own."""

    name: Literal["scaffold"]
    server_lr: PositiveFloat = 1.0

    def strategy(self, b: Build):
        from testbed.algorithms import Tracking
        from testbed.local import LocalSGD

        return Tracking(LocalSGD(**b.schedule), "scaffold", 1.0, self.server_lr, b.fleet_size, b.up.dtype,
                        b.down.dtype)
