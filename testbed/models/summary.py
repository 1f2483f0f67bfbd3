"""Each zoo model on its papers' input: parameters and forward FLOPs (fvcore multiply-adds) per sample.

`model_table()` feeds `testbed models`. REFERENCE_INPUTS[name] = (factory of an example input with batch
dimension 1, num_classes); REFERENCE_DATA[name] names the dataset and the paper that uses the model on it.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch

from testbed.flops import forward_flops_per_sample
from testbed.models import MODELS


class Reference(NamedTuple):
    example: Callable[[], torch.Tensor]
    num_classes: int


def _image(channels: int, side: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.zeros(1, channels, side, side)


def _tokens(length: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.zeros(1, length, dtype=torch.long)


def _signal(channels: int, steps: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.zeros(1, channels, steps)


def _vector(dim: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.zeros(1, dim)


REFERENCE_INPUTS: dict[str, Reference] = {
    "cnn_fedlps": Reference(_image(1, 28), 10),
    "cnn_512": Reference(_image(1, 28), 10),
    "cnn_feddumap": Reference(_image(3, 32), 10),
    "lenet5": Reference(_image(3, 32), 10),
    "cnn_fedadam_ssm": Reference(_image(1, 28), 10),
    "cnn_fedlion": Reference(_image(1, 28), 10),
    "vgg11": Reference(_image(3, 32), 10),
    "vgg13": Reference(_image(3, 32), 100),
    "vgg16": Reference(_image(3, 64), 200),
    "vgg11_gn": Reference(_image(3, 32), 10),
    "vgg13_gn": Reference(_image(3, 32), 100),
    "vgg16_gn": Reference(_image(3, 64), 200),
    "resnet18": Reference(_image(3, 32), 10),
    "resnet20": Reference(_image(3, 32), 10),
    "cnn1d_har": Reference(_signal(6, 128), 6),
    "char_lstm": Reference(_tokens(80), 80),
    "lstm_lm": Reference(_tokens(10), 10_000),
    "mlp": Reference(_image(1, 8), 10),
    "logreg": Reference(_vector(60), 10),
}

REFERENCE_DATA: dict[str, str] = {
    "cnn_fedlps": "MNIST 1x28x28 (FedLPS)",
    "cnn_512": "MNIST 1x28x28 (FedAvg CNN)",
    "cnn_feddumap": "CIFAR-10 3x32x32 (FedDUMAP)",
    "lenet5": "CIFAR-10 3x32x32 (FedDUMAP)",
    "cnn_fedadam_ssm": "Fashion-MNIST 1x28x28 (FedAdam-SSM)",
    "cnn_fedlion": "EMNIST-digits 1x28x28 (FedLion)",
    "vgg11": "CIFAR-10 3x32x32 (FedLPS, FedDUMAP)",
    "vgg13": "CIFAR-100 3x32x32 (FedLPS)",
    "vgg16": "Tiny-ImageNet 3x64x64 (FedLPS)",
    "vgg11_gn": "CIFAR-10 3x32x32",
    "vgg13_gn": "CIFAR-100 3x32x32",
    "vgg16_gn": "Tiny-ImageNet 3x64x64",
    "resnet18": "CIFAR-10 3x32x32 (FAdamGT, FedAdam-SSM)",
    "resnet20": "CIFAR-10 3x32x32 (FedLion)",
    "cnn1d_har": "UCI HAPT 6x128 (acc + gyro, 2.56 s)",
    "char_lstm": "Shakespeare 80 chars, vocab 80 (LEAF)",
    "lstm_lm": "Reddit 10 tokens, vocab 10,000 (FedLPS)",
    "mlp": "scikit-learn digits 1x8x8 (FedAvg 2NN)",
    "logreg": "synthetic 60 features (FedProx)",
}


def build_reference(name: str, width: float = 1.0) -> tuple[torch.nn.Module, torch.Tensor]:
    """The model `name` built for its reference input, and that input (batch of 1)."""
    reference = REFERENCE_INPUTS[name]
    example = reference.example()
    return MODELS[name](tuple(example.shape[1:]), reference.num_classes, width), example


def count_parameters(model: torch.nn.Module) -> int:
    """Trainable parameters, a tied weight counted once."""
    return sum(p.numel() for p in model.parameters())


def model_table(names=None) -> list[dict]:
    """One row per model: name, input, classes, parameters, forward_flops (multiply-adds per sample)."""
    rows = []
    for name in names or MODELS:
        model, example = build_reference(name)
        rows.append({
            "name": name,
            "input": REFERENCE_DATA[name],
            "classes": REFERENCE_INPUTS[name].num_classes,
            "parameters": count_parameters(model),
            "forward_flops": forward_flops_per_sample(model, example),
        })
    return rows


def format_table(rows: list[dict] | None = None) -> str:
    """model_table() as aligned text."""
    rows = model_table() if rows is None else rows
    head = f"{'model':<16} {'input':<40} {'classes':>7} {'parameters':>12} {'forward FLOPs':>15}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['name']:<16} {r['input']:<40} {r['classes']:>7} {r['parameters']:>12,} "
                     f"{r['forward_flops']:>15,}")
    return "\n".join(lines)
