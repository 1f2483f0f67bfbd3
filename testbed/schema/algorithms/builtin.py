"""The built-in algorithms by name: each one's config class as 'module:class', imported at its first lookup
(testbed/names.py's Registry), so that validating a scenario imports the one family it names. In its own module,
below both the `algorithm:` union (__init__.py) and the plugin's section (plugin.py), which tells a plugin's name
from a built-in's with it."""
from __future__ import annotations

from testbed.names import Registry

FAMILY = "testbed.schema.algorithms."
# name -> its config, 'module:class', imported at its first lookup; in the order error messages list them
BUILTIN = Registry({
    "fedavg": FAMILY + "dense:FedAvgConfig",
    "fedprox": FAMILY + "dense:FedProxConfig",
    "fedavgm": FAMILY + "dense:FedAvgMConfig",
    "fedadagrad": FAMILY + "dense:FedAdagradConfig",
    "fedadam": FAMILY + "dense:FedAdamConfig",
    "fedyogi": FAMILY + "dense:FedYogiConfig",
    "fedlps": FAMILY + "submodels:FedLPSConfig",
    "flst": FAMILY + "submodels:FLSTConfig",
    "rcr": FAMILY + "submodels:RCRConfig",
    "partial": FAMILY + "submodels:PartialConfig",
    "heterofl": FAMILY + "submodels:HeteroFLConfig",
    "fjord": FAMILY + "submodels:FjORDConfig",
    "fedrolex": FAMILY + "submodels:FedRolexConfig",
    "efd": FAMILY + "submodels:EFDConfig",
    "fedmp": FAMILY + "submodels:FedMPConfig",
    "fedadam_moments": FAMILY + "adaptive:FedAdamMomentsConfig",
    "fedadam_ssm": FAMILY + "adaptive:FedAdamSSMConfig",
    "fedadam_top": FAMILY + "adaptive:FedAdamTopConfig",
    "fedadam_ssm_m": FAMILY + "adaptive:FedAdamSSMMConfig",
    "fedadam_ssm_v": FAMILY + "adaptive:FedAdamSSMVConfig",
    "fairness_top": FAMILY + "adaptive:FairnessTopConfig",
    "onebit_adam": FAMILY + "adaptive:OneBitAdamConfig",
    "efficient_adam": FAMILY + "adaptive:EfficientAdamConfig",
    "fedlion": FAMILY + "adaptive:FedLionConfig",
    "mfl": FAMILY + "adaptive:MFLConfig",
    "fafed": FAMILY + "adaptive:FAFEDConfig",
    "fedda": FAMILY + "adaptive:FedDAConfig",
    "fadamgt": FAMILY + "adaptive:FAdamGTConfig",
    "fadamet": FAMILY + "adaptive:FAdamETConfig",
    "localadam": FAMILY + "adaptive:LocalAdamConfig",
    "scaffold": FAMILY + "adaptive:ScaffoldConfig",
    "fedlada": FAMILY + "adaptive:FedLADAConfig",
    "data_sharing": FAMILY + "server_data:DataSharingConfig",
    "feddumap": FAMILY + "server_data:FedDUMAPConfig",
    "feddu": FAMILY + "server_data:FedDUConfig",
    "feddu_s": FAMILY + "server_data:FedDUSConfig",
    "feddum": FAMILY + "server_data:FedDUMConfig",
    "serverm": FAMILY + "server_data:ServerMConfig",
    "devicem": FAMILY + "server_data:DeviceMConfig",
    "fedduap": FAMILY + "server_data:FedDUAPConfig",
    "fedap": FAMILY + "server_data:FedAPConfig",
    "hrank": FAMILY + "server_data:HRankConfig",
    "imc": FAMILY + "server_data:IMCConfig",
    "prunefl": FAMILY + "server_data:PruneFLConfig",
    "hybrid_fl": FAMILY + "server_data:HybridFLConfig",
    "flower": FAMILY + "flower:FlowerConfig",
})
