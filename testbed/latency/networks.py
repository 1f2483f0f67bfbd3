"""The networks a calibration trains: one layer each, followed by a flatten and a linear classifier.

Two sources, taken in turn (the second: one layer, a small 2-D CNN, an MLP or recurrent net, a 1-D CNN, a tiny
chain of linear layers whose step is its fixed costs, a MobileNet-style CNN of depthwise separable blocks):
- the zoo's own layers: every leaf layer of every built-in model at its reference input, at widths 1, 0.5 and 0.25
  (the submodel methods' shrunk networks), with the input shape it sees there;
- sampled layers, for the models calibration never saw: convolutions (1-D, 2-D, grouped, depthwise) of sampled
  channels, kernels, strides and sizes; linear layers; batch, group and layer norms; max and average pooling;
  ReLU, tanh, GELU; LSTM and GRU; embeddings.
A layer that is not its model's first with parameters gets a gradient for its input, as in its model: an input
that needs none skips part of a layer's backward pass (a convolution's or linear layer's gradient for its input; all
of an activation's or a pooling layer's backward), and a calibration that measured every layer first timed each
convolution's backward at about half its work in a deep network (VGG-11 at batch 32: 8-33 ms against 16-48 ms).
Such a network starts with a learnable scale of its input (_InputGrad).
Each comes at a sampled batch size, cut so that its step stays under MAX_STEP_FLOPS (a calibration measures many
networks rather than a few large ones; the predictors carry a large layer's rate from its nearest samples).
"""
from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import torch
from torch import nn

BATCH_SIZES = (1, 2, 3, 4, 5, 8, 10, 16, 20, 32)
WIDTHS = (1.0, 0.5, 0.25)
MAX_HEAD_WEIGHTS = 2_000_000   # a large classifier only after few features (a language model's, not a CNN's)
MAX_STEP_FLOPS = 4e9        # two per multiply-add, forward and backward
CLASSES = (10, 10, 10, 2, 100, 1000, 10000)   # a classifier's outputs, drawn per network (the loss's sizes)
_NO_WORK = (nn.Flatten, nn.Dropout, nn.Identity)   # layers that train nothing of their own


@dataclass(frozen=True)
class Workload:
    model: nn.Module
    sample: torch.Tensor     # one input with its batch dimension
    batch_size: int
    label: str


class _FirstOutput(nn.Module):
    """A layer whose output is a tuple (LSTM, GRU): its first element goes on."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        out = self.layer(x)
        return out[0] if isinstance(out, tuple) else out


class _InputGrad(nn.Module):
    """x times a learnable scalar: what follows it computes a gradient for its input, as a layer deep in a model
    does."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return x * self.scale


def one_layer(layer: nn.Module, sample: torch.Tensor, classes: int = 10, input_grad: bool = False) -> nn.Module:
    """layer -> flatten -> a linear classifier of `classes`; with input_grad (a floating input), the layer's
    input needs a gradient (_InputGrad before it)."""
    body = _FirstOutput(layer)
    if input_grad and sample.is_floating_point():
        body = nn.Sequential(_InputGrad(), body)
    with torch.no_grad():
        features = body(sample).flatten(1).shape[1]
    while classes > 10 and features * classes > MAX_HEAD_WEIGHTS:
        classes //= 10
    return nn.Sequential(body, nn.Flatten(), nn.Linear(features, classes))


def _step_flops(layer_flops_per_sample: float) -> float:
    return 3 * 2 * layer_flops_per_sample


def zoo_layers() -> list[tuple[nn.Module, torch.Tensor, str, bool]]:
    """Every distinct leaf layer of the zoo's models at WIDTHS, with one input as it sees it there, and whether
    its model computes that input's gradient (every layer after the first with parameters)."""
    from testbed.models import MODELS
    from testbed.models.summary import REFERENCE_INPUTS
    found: dict[tuple, tuple[nn.Module, torch.Tensor, str, bool]] = {}
    for name, width in itertools.product(REFERENCE_INPUTS, WIDTHS):
        ref = REFERENCE_INPUTS[name]
        example = ref.example()
        try:
            model = MODELS[name](tuple(example.shape[1:]), ref.num_classes, width)
        except (ValueError, TypeError):   # a model without a width
            continue
        hooks = []

        def record(module, inputs, output, model_name=f"{name}@{width:g}"):
            x = inputs[0]
            if not isinstance(x, torch.Tensor):
                return
            deep = x.requires_grad   # it depends on a parameter: its model computes its gradient
            key = (repr(module), tuple(x.shape[1:]), x.dtype, deep)
            if key not in found:
                found[key] = (copy.deepcopy(module), x[:1].detach().clone(),
                              f"{model_name}:{type(module).__name__}{'' if deep else ' first'}", deep)

        for module in model.modules():
            if not list(module.children()) and not isinstance(module, _NO_WORK):
                hooks.append(module.register_forward_hook(record))
        with torch.enable_grad():
            model.eval()(example)
        for h in hooks:
            h.remove()
    return list(found.values())


def _sampled_layer(rng: np.random.Generator) -> tuple[nn.Module, torch.Tensor, str]:
    kind = rng.choice(["conv2d", "conv2d", "conv2d", "depthwise", "conv1d", "linear", "linear", "norm", "pool",
                       "activation", "lstm", "gru", "embedding"])
    pick = lambda options: int(rng.choice(options))   # noqa: E731
    if kind in ("conv2d", "depthwise"):
        cin = pick([1, 3, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256])
        cout = cin if kind == "depthwise" else pick([4, 8, 16, 24, 32, 48, 64, 96, 128, 256])
        k, side = pick([1, 3, 3, 5, 7]), pick([4, 7, 8, 14, 16, 28, 32])
        layer = nn.Conv2d(cin, cout, k, stride=pick([1, 1, 2]), padding=k // 2,
                          groups=cin if kind == "depthwise" else 1, bias=bool(rng.integers(2)))
        return layer, torch.randn(1, cin, side, side), kind
    if kind == "conv1d":
        cin, cout, k = pick([1, 3, 6, 9, 16, 32, 64]), pick([8, 16, 32, 64, 128]), pick([3, 5, 9])
        return nn.Conv1d(cin, cout, k, padding=k // 2), torch.randn(1, cin, pick([32, 64, 128, 256])), kind
    if kind == "linear":
        fin, fout = pick([16, 32, 60, 64, 128, 200, 256, 512, 784, 1024, 2048]), pick([10, 32, 64, 128, 256, 512,
                                                                                         1024, 2048])
        return nn.Linear(fin, fout), torch.randn(1, fin), kind
    if kind in ("norm", "pool", "activation"):
        channels, side = pick([4, 8, 16, 32, 64, 128, 256]), pick([4, 8, 16, 28, 32])
        layer = {"norm": lambda: [nn.BatchNorm2d(channels), nn.GroupNorm(2 if channels > 2 else 1, channels),
                                  nn.LayerNorm([channels, side, side])][pick([0, 1, 2])],
                 "pool": lambda: [nn.MaxPool2d(2), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1)][pick([0, 1, 2])],
                 "activation": lambda: [nn.ReLU(), nn.Tanh(), nn.GELU(), nn.Sigmoid()][pick([0, 1, 2, 3])]}[kind]()
        return layer, torch.randn(1, channels, side, side), f"{kind}:{type(layer).__name__}"
    if kind in ("lstm", "gru"):
        fin, hidden, steps = pick([8, 16, 32, 64, 128]), pick([16, 32, 64, 128, 256]), pick([5, 10, 20, 40, 80])
        layer = (nn.LSTM if kind == "lstm" else nn.GRU)(fin, hidden, num_layers=pick([1, 1, 2]), batch_first=True)
        return layer, torch.randn(1, steps, fin), kind
    vocab, dim, steps = pick([80, 1000, 10000]), pick([8, 32, 64, 128]), pick([10, 40, 80])
    return nn.Embedding(vocab, dim), torch.zeros(1, steps, dtype=torch.long), kind


def _conv_stack(rng: np.random.Generator, dims: int) -> tuple[nn.Module, torch.Tensor, str]:
    """A small CNN (2-D or 1-D): 1-4 blocks of convolution (sometimes depthwise), norm, activation, pooling."""
    pick = lambda options: options[int(rng.integers(len(options)))]   # noqa: E731
    conv, bn, pool = ((nn.Conv2d, nn.BatchNorm2d, nn.MaxPool2d) if dims == 2 else
                      (nn.Conv1d, nn.BatchNorm1d, nn.MaxPool1d))
    channels, side = pick([1, 3, 6, 9]), pick([8, 16, 28, 32] if dims == 2 else [32, 64, 128])
    sample = torch.randn(1, channels, *([side] * dims))
    layers = []
    for _ in range(int(rng.integers(1, 5))):
        k = pick([1, 3, 3, 5])
        if channels > 1 and rng.random() < 0.2:
            layers.append(conv(channels, channels, k, padding=k // 2, groups=channels))
        out = pick([8, 16, 24, 32, 48, 64, 96, 128, 192, 256])
        layers.append(conv(channels, out, k, padding=k // 2))
        channels = out
        norm = pick(["none", "batch", "group"])
        if norm != "none":
            layers.append(bn(channels) if norm == "batch" else nn.GroupNorm(math.gcd(channels, 4), channels))
        layers.append(pick([nn.ReLU, nn.ReLU6, nn.Tanh])())
        if side >= 8 and rng.random() < 0.6:
            layers.append(pool(2))
            side //= 2
    return nn.Sequential(*layers), sample, f"cnn{dims}d x{len(layers)}"


def _dense_stack(rng: np.random.Generator) -> tuple[nn.Module, torch.Tensor, str]:
    """An MLP of 1-3 hidden layers, or a recurrent net (embedding or features, LSTM or GRU)."""
    pick = lambda options: options[int(rng.integers(len(options)))]   # noqa: E731
    if rng.random() < 0.6:
        width, layers = pick([32, 60, 64, 100, 200, 256, 784, 1024]), []
        sample = torch.randn(1, width)
        for _ in range(int(rng.integers(1, 4))):
            out = pick([32, 64, 128, 200, 256, 512, 1024, 2048])
            layers += [nn.Linear(width, out), pick([nn.ReLU, nn.Tanh, nn.GELU])()]
            width = out
        return nn.Sequential(*layers), sample, f"mlp x{len(layers) // 2}"
    steps, hidden = pick([5, 10, 20, 40, 80]), pick([16, 32, 64, 128, 256])
    rnn = pick([nn.LSTM, nn.GRU])
    if rng.random() < 0.5:
        vocab, dim = pick([80, 1000, 10000]), pick([8, 32, 64])
        body = nn.Sequential(nn.Embedding(vocab, dim), _FirstOutput(rnn(dim, hidden, pick([1, 2]), batch_first=True)))
        return body, torch.zeros(1, steps, dtype=torch.long), f"embedding+{rnn.__name__}"
    features = pick([3, 6, 9, 16, 32])
    return _FirstOutput(rnn(features, hidden, pick([1, 2]), batch_first=True)), torch.randn(1, steps, features), \
        rnn.__name__


def _tiny_chain(rng: np.random.Generator) -> tuple[nn.Module, torch.Tensor, str]:
    """Linear layers of a few units, 1-24 deep, with or without biases: a step of almost nothing but its fixed
    costs, so the step terms (a step's, an op's, a parameter tensor's: devices/latency.py) are told apart. Among
    the other networks a step's tensors grow with its ops, and a fit could trade one term for another (the
    fixed cost came out 0 and a tensor's 22 us in one calibration, 69 us and 7 us in the next)."""
    width, depth, bias = int(rng.integers(1, 9)), int(rng.integers(1, 25)), bool(rng.integers(2))
    return nn.Sequential(*[nn.Linear(width, width, bias=bias) for _ in range(depth)]), torch.randn(1, width), \
        f"tiny x{depth}{'' if bias else ' no bias'}"


def _fitted_batch(model: nn.Module, sample: torch.Tensor, rng: np.random.Generator) -> int:
    """A sampled batch size, halved until the step's FLOPs fit MAX_STEP_FLOPS."""
    from testbed.flops import flop_counts
    per_sample = flop_counts(model, sample)[0] if sample.is_floating_point() else 0
    batch = int(rng.choice(BATCH_SIZES))
    while batch > 1 and _step_flops(per_sample) * batch > MAX_STEP_FLOPS:
        batch //= 2
    return batch


def _separable_stack(rng: np.random.Generator) -> tuple[nn.Module, torch.Tensor, str]:
    """A MobileNet-style CNN, the edge's own (MobileNet, Howard et al. 2017; MobileNetV2's inverted residual
    blocks, Sandler et al. 2018, without the skip): a stem convolution, then 1-4 blocks of a 1x1 expansion (not
    always), a depthwise k x k convolution, a 1x1 projection, each with batch norm, ReLU6 after all but a
    projection that follows an expansion."""
    pick = lambda options: options[int(rng.integers(len(options)))]   # noqa: E731
    side, channels = pick([16, 28, 32]), pick([8, 16, 24, 32])
    sample = torch.randn(1, 3, side, side)
    stride = pick([1, 2])
    layers: list[nn.Module] = [nn.Conv2d(3, channels, 3, stride, 1), nn.BatchNorm2d(channels), nn.ReLU6()]
    side = (side - 1) // stride + 1   # the output side of a k x k, padding k // 2, stride s layer
    for _ in range(int(rng.integers(1, 5))):
        hidden = channels * pick([1, 1, 4, 6])
        if hidden != channels:
            layers += [nn.Conv2d(channels, hidden, 1), nn.BatchNorm2d(hidden), nn.ReLU6()]
        k, stride = pick([3, 3, 5]), pick([1, 1, 2]) if side >= 8 else 1
        layers += [nn.Conv2d(hidden, hidden, k, stride, k // 2, groups=hidden), nn.BatchNorm2d(hidden), nn.ReLU6()]
        out = pick([8, 16, 24, 32, 48, 64, 96, 128])
        layers += [nn.Conv2d(hidden, out, 1), nn.BatchNorm2d(out)] + ([nn.ReLU6()] if hidden == channels else [])
        channels, side = out, (side - 1) // stride + 1
    return nn.Sequential(*layers), sample, f"separable x{len(layers)}"


def _sampled(rng: np.random.Generator, i: int) -> tuple[nn.Module, torch.Tensor, str, bool]:
    """Sampled networks in turn: a layer (deep in a model three times in four), a 2-D CNN, a dense or recurrent
    net, a 1-D CNN, a tiny chain, a MobileNet-style CNN (each the whole model: its first layer reads the input)."""
    kind = i % 6
    if kind == 0:
        layer, sample, label = _sampled_layer(rng)
        deep = bool(rng.random() < 0.75)
        return layer, sample, label + ("" if deep else " first"), deep
    stacks = (None, lambda: _conv_stack(rng, 2), lambda: _dense_stack(rng), lambda: _conv_stack(rng, 1),
              lambda: _tiny_chain(rng), lambda: _separable_stack(rng))
    return (*stacks[kind](), False)


def workloads(seed: int = 0) -> Iterator[Workload]:
    """The zoo's layers and sampled networks in turn (each at a sampled batch size), then sampled ones for ever."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    zoo = zoo_layers()
    order = rng.permutation(len(zoo))
    for i in itertools.count():
        layer, sample, label, deep = zoo[order[i // 2]] if i % 2 == 0 and i // 2 < len(zoo) else \
            _sampled(rng, i // 2)
        model = one_layer(copy.deepcopy(layer), sample, int(rng.choice(CLASSES)), deep)
        batch = _fitted_batch(model, sample, rng)
        yield Workload(model, sample, batch, f"{label} x{batch}")
