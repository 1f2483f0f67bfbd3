"""FedAvg, FedProx and the FedOpt servers (FedAvgM, FedAdagrad, FedAdam, FedYogi): testbed/algorithms/fedavg.py."""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import NonNegativeFloat, PositiveFloat

from testbed.schema.algorithms.config import BUFFERED, BUFFERED_AND_MIXING, AlgorithmConfig
from testbed.schema.common import Fraction

if TYPE_CHECKING:
    from testbed.algorithms.base import Build


class FedAvgConfig(AlgorithmConfig):
    ASYNC: ClassVar[frozenset] = BUFFERED_AND_MIXING
    name: Literal["fedavg"]

    def strategy(self, b: Build):
        from testbed.algorithms import FedAvg

        return FedAvg(b.client, down=b.down, up=b.up)


class FedProxConfig(AlgorithmConfig):
    ASYNC: ClassVar[frozenset] = BUFFERED_AND_MIXING
    name: Literal["fedprox"]
    mu: NonNegativeFloat = 0.01

    def strategy(self, b: Build):
        from testbed.algorithms import FedAvg

        return FedAvg(b.client, proximal_mu=self.mu, down=b.down, up=b.up)


class FedAvgMConfig(AlgorithmConfig):
    ASYNC: ClassVar[frozenset] = BUFFERED
    name: Literal["fedavgm"]
    server_lr: PositiveFloat = 1.0
    server_momentum: Fraction = 0.9

    def strategy(self, b: Build):
        from testbed.algorithms import FedAvg, ServerSGD

        return FedAvg(b.client, ServerSGD(self.server_lr, self.server_momentum), down=b.down, up=b.up)


class FedAdagradConfig(AlgorithmConfig):
    ASYNC: ClassVar[frozenset] = BUFFERED
    name: Literal["fedadagrad"]
    server_lr: PositiveFloat = 0.01   # Reddi et al. tune it per task; 1e-2 is a common start
    beta1: Fraction = 0.0
    tau: PositiveFloat = 1e-3

    def _server(self):
        from testbed.algorithms import ServerAdagrad

        return ServerAdagrad(self.server_lr, self.beta1, tau=self.tau)

    def strategy(self, b: Build):
        from testbed.algorithms import FedAvg

        return FedAvg(b.client, self._server(), down=b.down, up=b.up)


class FedAdamConfig(FedAdagradConfig):
    name: Literal["fedadam"]
    beta1: Fraction = 0.9
    beta2: Fraction = 0.99

    def _server(self):
        from testbed.algorithms import ServerAdam

        return ServerAdam(self.server_lr, self.beta1, self.beta2, self.tau)


class FedYogiConfig(FedAdamConfig):
    name: Literal["fedyogi"]

    def _server(self):
        from testbed.algorithms import ServerYogi

        return ServerYogi(self.server_lr, self.beta1, self.beta2, self.tau)
