"""FedAvg, FedProx and the FedOpt servers (FedAvgM, FedAdagrad, FedAdam, FedYogi): testbed/algorithms/fedavg.py."""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import NonNegativeFloat, PositiveFloat

from testbed.schema.algorithms.config import BUFFERED, BUFFERED_AND_MIXING, AlgorithmConfig
from testbed.schema.common import Fraction


class FedAvgConfig(AlgorithmConfig):
    ASYNC: ClassVar[frozenset] = BUFFERED_AND_MIXING
    name: Literal["fedavg"]


class FedProxConfig(AlgorithmConfig):
    ASYNC: ClassVar[frozenset] = BUFFERED_AND_MIXING
    name: Literal["fedprox"]
    mu: NonNegativeFloat = 0.01


class FedAvgMConfig(AlgorithmConfig):
    ASYNC: ClassVar[frozenset] = BUFFERED
    name: Literal["fedavgm"]
    server_lr: PositiveFloat = 1.0
    server_momentum: Fraction = 0.9


class FedAdagradConfig(AlgorithmConfig):
    ASYNC: ClassVar[frozenset] = BUFFERED
    name: Literal["fedadagrad"]
    server_lr: PositiveFloat = 0.01   # Reddi et al. tune it per task; 1e-2 is a common start
    beta1: Fraction = 0.0
    tau: PositiveFloat = 1e-3


class FedAdamConfig(FedAdagradConfig):
    name: Literal["fedadam"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.99


class FedYogiConfig(FedAdamConfig):
    name: Literal["fedyogi"]
