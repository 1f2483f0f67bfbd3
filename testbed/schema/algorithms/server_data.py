"""Methods with a server that has data of its own (specs/feddumap.md): Data-sharing, Hybrid-FL, FedDUMAP and its
ablations, FedAP and the pruning baselines."""
from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from testbed.schema.algorithms.config import AlgorithmConfig
from testbed.schema.common import Fraction


# ---- a server with its own data (FedDUMAP, specs/feddumap.md) ----------------------------------------------
class _ServerDataMethod(AlgorithmConfig):
    """Methods that train on the server's data: the Scenario checks that data.server is set."""

    NEEDS_SERVER_DATA: ClassVar[bool] = True


class DataSharingConfig(_ServerDataMethod):
    """Data-sharing (Zhao et al. 2018): each device also trains on share_fraction x (all device data) random
    server samples (at most n0), then FedAvg with the augmented sizes as weights."""

    name: Literal["data_sharing"]
    share_fraction: Annotated[float, Field(gt=0, le=1)] = 0.05

    def server_share(self) -> float:
        return self.share_fraction


Prune = Literal["hessian", "uniform", "unstructured", "adaptive"]


class FedDUMAPConfig(_ServerDataMethod):
    """FedDUMAP: dynamic server update (FedDU), device and server momentum (FedDUM), adaptive pruning (FedAP)."""

    name: Literal["feddumap"]
    server_update: Literal["dynamic", "fixed", "client", "none"] = "dynamic"   # fixed: FedDU-S; client: Hybrid-FL
    fixed_steps: PositiveInt = 10           # FedDU-S's tau_eff
    C: PositiveFloat = 1.0
    decay: Annotated[float, Field(gt=0, le=1)] = 0.99
    device_momentum: Fraction = 0.9         # beta' of the devices' EMA momentum, restarted each round (0: plain SGD)
    server_momentum: Fraction | None = 0.9  # beta (None: no server momentum)
    server_lr: PositiveFloat = 1.0          # eta_s
    prune_round: PositiveInt | None = 30    # T_p (None: no pruning)
    prune: Prune = "hessian"                # FedAP | HRank | IMC | PruneFL
    prune_rate: Fraction | None = None      # uniform: the per-layer rate; else a fixed p* instead of the estimate
    lanczos_steps: PositiveInt = 50
    hessian_samples: PositiveInt = 100
    rank_samples: PositiveInt = 500
    reconfigure_every: PositiveInt = 10     # PruneFL (prune: adaptive): rounds between mask reconfigurations

    @model_validator(mode="after")
    def _uniform_needs_rate(self):
        if self.prune == "uniform" and self.prune_rate is None:
            raise ValueError("prune_rate: uniform pruning (HRank) needs a per-layer rate, e.g. 0.4")
        return self


class FedDUConfig(FedDUMAPConfig):
    name: Literal["feddu"]
    device_momentum: Fraction = 0.0
    server_momentum: Fraction | None = None
    prune_round: PositiveInt | None = None


class FedDUSConfig(FedDUConfig):
    name: Literal["feddu_s"]
    server_update: Literal["dynamic", "fixed", "client", "none"] = "fixed"


class FedDUMConfig(FedDUMAPConfig):
    name: Literal["feddum"]
    prune_round: PositiveInt | None = None


class ServerMConfig(FedDUConfig):
    name: Literal["serverm"]
    server_momentum: Fraction | None = 0.9


class DeviceMConfig(FedDUConfig):
    name: Literal["devicem"]
    device_momentum: Fraction = 0.9


class FedDUAPConfig(FedDUConfig):
    name: Literal["fedduap"]
    prune_round: PositiveInt | None = 30


class FedAPConfig(FedDUAPConfig):
    name: Literal["fedap"]
    server_update: Literal["dynamic", "fixed", "client", "none"] = "none"


class HRankConfig(FedAPConfig):
    name: Literal["hrank"]
    prune: Prune = "uniform"
    prune_rate: Fraction | None = 0.4


class IMCConfig(FedAPConfig):
    name: Literal["imc"]
    prune: Prune = "unstructured"


class PruneFLConfig(FedAPConfig):
    name: Literal["prunefl"]
    prune: Prune = "adaptive"


class HybridFLConfig(FedDUConfig):
    name: Literal["hybrid_fl"]
    server_update: Literal["dynamic", "fixed", "client", "none"] = "client"
