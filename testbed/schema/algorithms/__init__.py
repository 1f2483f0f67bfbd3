"""The `algorithm:` section: one small config per algorithm, each building its Strategy; or a plugin's.

Every config's `strategy(build)` reads what it needs from a Build: the local optimizer, the codecs, the submodel
costs of the model (submodel methods) and the run's length (P-UCBV's xi = R / (K eps)). The configs live by family
(dense, submodels, adaptive, server_data); a name that is not a built-in's goes to PluginAlgorithm (plugin.py).
"""
from __future__ import annotations

from typing import Annotated, Union, get_args

from pydantic import Discriminator, Tag

from testbed.schema.algorithms.adaptive import (EfficientAdamConfig, FAdamETConfig, FAdamGTConfig, FAFEDConfig,
                                                FairnessTopConfig, FedAdamMomentsConfig, FedAdamSSMConfig,
                                                FedAdamSSMMConfig, FedAdamSSMVConfig, FedAdamTopConfig, FedDAConfig,
                                                FedLADAConfig, FedLionConfig, LocalAdamConfig, MFLConfig,
                                                OneBitAdamConfig, ScaffoldConfig)
from testbed.schema.algorithms.config import AlgorithmConfig
from testbed.schema.algorithms.dense import (FedAdagradConfig, FedAdamConfig, FedAvgConfig, FedAvgMConfig,
                                             FedProxConfig, FedYogiConfig)
from testbed.schema.algorithms.flower import FlowerConfig
from testbed.schema.algorithms.plugin import PluginAlgorithm
from testbed.schema.algorithms.server_data import (DataSharingConfig, DeviceMConfig, FedAPConfig, FedDUAPConfig,
                                                   FedDUConfig, FedDUMAPConfig, FedDUMConfig, FedDUSConfig,
                                                   HRankConfig, HybridFLConfig, IMCConfig, PruneFLConfig,
                                                   ServerMConfig)
from testbed.schema.algorithms.submodels import (EFDConfig, FedLPSConfig, FedMPConfig, FedRolexConfig, FjORDConfig,
                                                 FLSTConfig, HeteroFLConfig, PartialConfig, RCRConfig)

CONFIGS = (FedAvgConfig, FedProxConfig, FedAvgMConfig, FedAdagradConfig, FedAdamConfig, FedYogiConfig, FedLPSConfig,
           FLSTConfig, RCRConfig, PartialConfig, HeteroFLConfig, FjORDConfig, FedRolexConfig, EFDConfig, FedMPConfig,
           FedAdamMomentsConfig, FedAdamSSMConfig, FedAdamTopConfig, FedAdamSSMMConfig, FedAdamSSMVConfig,
           FairnessTopConfig, OneBitAdamConfig, EfficientAdamConfig, FedLionConfig, MFLConfig, FAFEDConfig,
           FedDAConfig, FAdamGTConfig, FAdamETConfig, LocalAdamConfig, ScaffoldConfig, FedLADAConfig,
           DataSharingConfig, FedDUMAPConfig, FedDUConfig, FedDUSConfig, FedDUMConfig, ServerMConfig, DeviceMConfig,
           FedDUAPConfig, FedAPConfig, HRankConfig, IMCConfig, PruneFLConfig, HybridFLConfig, FlowerConfig)
# name -> config of every built-in, in the order error messages list them
BUILTIN = {get_args(c.model_fields["name"].annotation)[0]: c for c in CONFIGS}
PLUGIN = "plugin"


def section_kind(section) -> str | None:
    """The union member that reads an `algorithm:` section: a built-in's by its name, else the plugin's (which
    resolves the name or says it is unknown); None without a name."""
    name = section.get("name") if isinstance(section, dict) else getattr(section, "name", None)
    if name is None:
        return None
    return name if isinstance(name, str) and name in BUILTIN else PLUGIN


Algorithm = Annotated[Union[tuple(Annotated[c, Tag(name)] for name, c in BUILTIN.items())
                            + (Annotated[PluginAlgorithm, Tag(PLUGIN)],)],
                      Discriminator(section_kind)]


def runs_async() -> list[str]:
    """The built-in algorithms an asynchronous protocol can run (their configs' ASYNC rules)."""
    return sorted(name for name, c in BUILTIN.items() if c.ASYNC)


__all__ = ["Algorithm", "AlgorithmConfig", "BUILTIN", "CONFIGS", "PluginAlgorithm", "runs_async",
           *(c.__name__ for c in CONFIGS)]
