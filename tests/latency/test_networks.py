"""The calibration's networks: a layer is measured as its model runs it, and the step terms can be told apart."""
import itertools

import torch
from torch import nn

from testbed.latency.networks import one_layer, workloads, zoo_layers
from testbed.latency.trace import trace_step


def _backward_flops(model, sample, batch):
    return sum(op.flops for op in trace_step(model, sample, batch).ops if op.name == "convolution_backward")


def test_a_layer_deep_in_a_model_is_measured_with_its_input_gradient():
    # Conv2d(4, 8, 3, padding=1) on 6x6 at batch 2: 2 * 8 * 6 * 6 * 4 * 9 = 20,736 multiply-adds for its weight's
    # gradient, as many for its input's; the classifier after it has no convolution
    conv, x = nn.Conv2d(4, 8, 3, padding=1), torch.zeros(1, 4, 6, 6)
    assert _backward_flops(one_layer(conv, x), x, 2) == 2 * 20_736
    assert _backward_flops(one_layer(conv, x, input_grad=True), x, 2) == 2 * 2 * 20_736


def test_an_activation_deep_in_a_model_has_a_backward_pass():
    x = torch.zeros(1, 16)
    first = [op.name for op in trace_step(one_layer(nn.ReLU(), x), x, 4).ops]
    deep = [op.name for op in trace_step(one_layer(nn.ReLU(), x, input_grad=True), x, 4).ops]
    assert "threshold_backward" not in first and "threshold_backward" in deep


def test_only_the_layer_reading_a_models_input_is_first():
    found = zoo_layers()
    layers = {label: deep for _, _, label, deep in found}
    assert layers["lenet5@1:Conv2d first"] is False
    assert layers["mlp@1:Linear first"] is False   # after a Flatten, still the first with parameters
    assert all(deep for label, deep in layers.items() if not label.endswith(" first"))
    assert sum(not deep for *_, deep in found) < len(found) / 5   # 38 of 315


def test_tiny_chains_vary_the_tensors_apart_from_the_work():
    tiny = [w for w in itertools.islice(workloads(0), 200) if w.label.startswith("tiny")]
    assert len(tiny) >= 10
    tensors = {len(list(w.model.parameters())) for w in tiny}
    assert len(tensors) >= 6 and any("no bias" in w.label for w in tiny)


def test_mobilenet_style_networks_train_depthwise_blocks():
    separable = [w for w in itertools.islice(workloads(0), 240) if w.label.startswith("separable")]
    assert len(separable) >= 10
    for w in separable[:3]:
        names = {op.name for op in trace_step(w.model, w.sample, w.batch_size).ops}
        assert {"convolution_grouped", "convolution_backward_grouped", "hardtanh"} <= names
