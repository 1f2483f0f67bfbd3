"""testbed/latency/trace.py: a step's ops on fake tensors, their FLOPs and bytes by hand."""
import pytest
import torch
from torch import nn

from testbed.latency.trace import trace_step


def test_a_linear_layers_step_by_hand():
    model = nn.Linear(6, 3)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    step = trace_step(model, torch.zeros(1, 6), batch_size=4)
    assert step.tensors == 2
    names = [op.name for op in step.ops]
    forward = step.ops[names.index("addmm")]
    assert forward.flops == 2 * 4 * 6 * 3            # two per multiply-add
    # addmm reads bias (3), x (4x6), W^T (6x3) and writes 4x3, in fp32
    assert forward.nbytes == 4 * (3 + 24 + 18 + 12)
    assert "_log_softmax" in names and "nll_loss_forward" in names   # the cross-entropy
    assert names.count("mm") == 1                    # the weight's gradient (the input needs none)
    assert sum(op.flops for op in step.ops if op.name == "mm") == 2 * 4 * 6 * 3
    for n, p in model.named_parameters():            # nothing was trained: the trace runs on fake tensors
        assert torch.equal(p, before[n])


def test_the_forwards_module_calls_are_counted_and_the_hooks_removed():
    shared = nn.Linear(4, 4)
    model = nn.Sequential(nn.Flatten(), shared, nn.ReLU(), shared)   # the container, 3 children, one called twice
    assert trace_step(model, torch.zeros(1, 4), batch_size=8).modules == 5
    assert all(not m._forward_pre_hooks for m in model.modules())
    assert trace_step(nn.Linear(6, 3), torch.zeros(1, 6), batch_size=4).modules == 1


def test_a_depthwise_convolution_is_named_apart_and_its_weight_gradient_counted_once():
    """torch's formula counts a grouped convolution's weight gradient as if dense (groups times its work)."""
    conv = nn.Conv2d(16, 16, 3, padding=1, groups=16)
    model = nn.Sequential(nn.Conv2d(16, 16, 1), conv, nn.Flatten(), nn.Linear(16 * 8 * 8, 10))
    ops = {op.name: op for op in trace_step(model, torch.zeros(1, 16, 8, 8), batch_size=4).ops}
    # each output entry of the depthwise layer (4 x 16 x 8 x 8) is 9 multiply-adds, two FLOPs each
    per_pass = 2 * 4 * 16 * 8 * 8 * 9
    assert ops["convolution_grouped"].flops == per_pass
    assert ops["convolution_backward_grouped"].flops == 2 * per_pass   # its input's gradient and its weight's
    assert ops["convolution_backward"].flops == 2 * 4 * 16 * 8 * 8 * 16   # the dense 1x1 layer's weight gradient


def test_a_recurrent_layer_counts_its_gate_matmuls():
    model = nn.Sequential(nn.Embedding(20, 8), nn.LSTM(8, 16, batch_first=True))

    class Last(nn.Module):
        def forward(self, x):
            return x[0][:, -1]

    net = nn.Sequential(model, Last(), nn.Linear(16, 5))
    step = trace_step(net, torch.zeros(1, 7, dtype=torch.long), batch_size=3)
    rnn = [op for op in step.ops if op.name == "mkldnn_rnn_layer"]
    assert len(rnn) == 1
    # 7 steps x 3 samples, each W_ih (64x8) and W_hh (64x16): one multiply-add an entry, two FLOPs
    assert rnn[0].flops == 2 * 7 * 3 * (64 * 8 + 64 * 16)


def test_the_optimizer_is_part_of_the_step():
    from testbed.local import LocalSGD
    model = nn.Linear(6, 3)
    plain = trace_step(model, torch.zeros(1, 6), 4, LocalSGD(lr=0.1))
    momentum = trace_step(model, torch.zeros(1, 6), 4, LocalSGD(lr=0.1, momentum=0.9))
    assert len(momentum.ops) > len(plain.ops)


@pytest.mark.parametrize("name", ["cnn_512", "resnet20", "char_lstm", "cnn1d_har", "mlp"])
def test_a_step_interpolated_between_two_batch_sizes_equals_its_trace(name):
    from testbed.latency.trace import at_batch
    from testbed.models import MODELS
    from testbed.models.summary import REFERENCE_INPUTS
    ref = REFERENCE_INPUTS[name]
    example = ref.example()
    model = MODELS[name](tuple(example.shape[1:]), ref.num_classes, 0.5)
    low, high = trace_step(model, example, 2), trace_step(model, example, 32)
    for batch in (3, 7, 10, 20):
        assert at_batch(low, 2, high, 32, batch) == trace_step(model, example, batch)


def test_a_batch_of_one_is_traced_not_interpolated():
    from testbed.latency.clock import FULL, StepClock
    from testbed.models import MODELS
    from testbed.models.summary import REFERENCE_INPUTS
    ref = REFERENCE_INPUTS["char_lstm"]
    example = ref.example()
    model = MODELS["char_lstm"](tuple(example.shape[1:]), ref.num_classes, 0.5)
    clock = StepClock(model, example)
    clock.trace(FULL, 2), clock.trace(FULL, 32)
    assert clock.trace(FULL, 1) == trace_step(model, example, 1)   # its own ops: a copy fewer than at 2 or 32
    assert clock.trace(FULL, 7) == trace_step(model, example, 7)
    assert clock._traced[FULL, "cpu"] == {1, 2, 32}
