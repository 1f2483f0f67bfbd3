"""Prunable units for submodel methods (FedLPS §1.1, HeteroFL/FjORD-style width masks, FedMP...).

A unit is one row (dim 0) of a maskable weight: an output channel of a Conv, an output neuron of a Linear, a
gate row of an LSTM's weight_ih/weight_hh (4H rows: the input, forget, cell and output gates of each hidden
unit), a vocabulary row of an Embedding. Every Conv, Linear, recurrent layer and Embedding is maskable
EXCEPT the last classifier layer, whose rows are the classes; biases and normalization layers are never
masked. A decoder tied to an embedding is not a separate weight: it appears once, under the embedding's name.
"""
from __future__ import annotations

from torch import nn

MASKABLE = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear, nn.Embedding, nn.RNNBase)


def _weights(module: nn.Module):
    for name, param in module.named_parameters(recurse=False):
        if isinstance(module, nn.RNNBase):
            if name.startswith("weight_"):  # weight_ih_l{k}[_reverse], weight_hh_l{k}[_reverse] (and weight_hr)
                yield param
        elif name == "weight":
            yield param


def prunable_layers(model: nn.Module) -> dict[str, int]:
    """Qualified parameter name of each maskable weight -> its number of units (dim 0), in module order.

    The classifier is the last maskable module in registration order (every zoo model registers it last).
    Parameter names are those of model.named_parameters(), which lists a tied parameter once, under its first
    name; a weight shared with the classifier (the tied embedding of lstm_lm) stays maskable under that name.
    """
    names = {}
    for name, param in model.named_parameters():
        names.setdefault(id(param), name)
    layers = [m for m in model.modules() if isinstance(m, MASKABLE)]
    units: dict[str, int] = {}
    for module in layers[:-1]:
        for param in _weights(module):
            units[names[id(param)]] = int(param.shape[0])
    return units

