"""A model of your own, as a testbed factory (docs/extending.md): (sample_shape, num_classes, width) -> nn.Module.
`width` scales the hidden units, as it does for the zoo's models; the testbed counts its FLOPs with fvcore."""
import math

from torch import nn


def small_mlp(sample_shape: tuple[int, ...], num_classes: int, width: float = 1.0) -> nn.Module:
    hidden = max(1, round(32 * width))
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(sample_shape), hidden), nn.ReLU(),
                         nn.Linear(hidden, num_classes))
