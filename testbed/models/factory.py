"""The `model:` section's network: its factory (the zoo's, a registered one or user code) called with the data's
sample shape, class count and the section's width, and what it returns checked to be a torch module. Called by the
composition root (testbed/build.py); the section itself stays plain data (testbed/schema/data.py)."""
from __future__ import annotations

import torch

from testbed import plugins
from testbed.errors import PluginError
from testbed.names import MODELS


def make_model(name: str, width: float, sample_shape: tuple[int, ...], num_classes: int) -> torch.nn.Module:
    """The factory's (sample_shape, num_classes, width) -> torch.nn.Module."""
    factory = plugins.resolve("model", MODELS, name)
    try:
        model = factory(sample_shape, num_classes, width)
    except Exception as err:  # noqa: BLE001 - a user's factory failing is their bug, said in one line
        if name in MODELS:
            raise
        raise PluginError(f"model.name: '{name}' raised {type(err).__name__}: "
                          f"{' '.join(str(err).split())}; fix the factory") from err
    if not isinstance(model, torch.nn.Module):
        raise PluginError(f"model.name: '{name}' returned {type(model).__name__}, not a torch.nn.Module; "
                          "return the model")
    return model
