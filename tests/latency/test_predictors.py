"""devices/latency.py: the roofline and the calibrated predictors against totals computed by hand."""
import math

import pytest

from devices.latency import GROUPS, SAME_WORK, Calibrated, OpFit, Roofline, fit_op, group_of
from testbed.latency.trace import Op, Step


def op(name="mm", flops=0, nbytes=0, shapes=(1,) * 8):
    return Op(name, flops, nbytes, shapes)


def test_roofline_charges_overhead_plus_the_longer_of_compute_and_memory():
    roof = Roofline(flops_per_s=1e9, memory_Bps=1e8, call_overhead_s=1e-5)
    compute_bound = op(flops=2_000_000, nbytes=100_000)     # 2 ms of FLOPs, 1 ms of bytes
    memory_bound = op(flops=1_000, nbytes=500_000)          # 1 us of FLOPs, 5 ms of bytes
    assert roof.op_seconds(compute_bound) == pytest.approx(1e-5 + 2e-3)
    assert roof.op_seconds(memory_bound) == pytest.approx(1e-5 + 5e-3)
    seconds, unknown = roof.step_seconds(Step((compute_bound, memory_bound), tensors=2))
    assert seconds == pytest.approx(2e-5 + 7e-3) and unknown == {}


def test_an_op_fit_without_samples_is_its_base_line():
    fit = OpFit((1e-6, 1e-12, 1e-10), ())
    assert fit.seconds(op(flops=1_000_000, nbytes=10_000)) == pytest.approx(1e-6 + 1e-6 + 1e-6)


def test_the_nearest_samples_scale_the_base_line():
    a, b = op(flops=1000, nbytes=1000), op(flops=10**9, nbytes=10**8)
    fit = OpFit((1e-6, 0.0, 0.0), ((a.features(), math.log(2.0)), (b.features(), math.log(8.0))))
    # at a sample's own point: distance 0 weighs 4x a neighbour at distance 0.75 (1/(0+0.25) vs 1/(0.75+0.25))
    exact = op(flops=1000, nbytes=1000)
    d = math.dist(a.features(), b.features())
    w_a, w_b = 1 / 0.25, 1 / (d + 0.25)
    expected = 1e-6 * math.exp((w_a * math.log(2) + w_b * math.log(8)) / (w_a + w_b))
    assert fit.seconds(exact) == pytest.approx(expected)
    assert 1.9e-6 < fit.seconds(exact) < 2.2e-6   # its own sample dominates: twice the base


def test_a_fit_through_exact_linear_samples_recovers_them():
    ops = [op(flops=f, nbytes=n) for f, n in ((10**6, 10**4), (10**7, 10**5), (10**8, 10**4), (10**5, 10**7))]
    seconds = [2e-6 + 1e-11 * o.flops + 3e-10 * o.nbytes for o in ops]
    fit = fit_op(ops, seconds, most=10)
    for o, s in zip(ops, seconds):
        assert fit.seconds(o) == pytest.approx(s, rel=1e-6)


def test_a_calibrated_step_sums_its_groups_ops_and_its_fixed_terms():
    fits = {"convolution": OpFit((1e-3, 0, 0), ()), "add": OpFit((1e-6, 0, 0), ())}
    scale = dict.fromkeys(GROUPS, 1.0) | {"conv": 1.5, "small": 2.0}
    model = Calibrated(fits, scale, per_op_s=1e-6, per_tensor_s=1e-5, fixed_s=1e-4,
                       fallback=Roofline(1e9, 1e9, 5e-6), per_module_s=2e-5)
    ops = (op("convolution"), op("add"), op("add"), op("mystery", flops=10**6))
    seconds, unknown = model.step_seconds(Step(ops, tensors=3, modules=4))
    # conv 1.5 x 1 ms; adds 2 x 2 us; mystery by the fallback: 5 us + 1e6 / 1e9 s, "small" group x 2;
    # 4 ops x 1 us, 3 tensors x 10 us, 4 module calls x 20 us, 100 us
    expected = 1.5e-3 + 2 * 2e-6 + 2 * (5e-6 + 1e-3) + 4 * 1e-6 + 3 * 1e-5 + 4 * 2e-5 + 1e-4
    assert seconds == pytest.approx(expected)
    assert unknown == {"mystery": 1}


def test_an_op_under_another_devices_name_is_predicted_by_its_twin():
    """A GPU's calibration (cudnn_batch_norm) predicting the CPU's trace of the same layer (native_batch_norm) by
    that fit, not the fallback; an op with no twin measured still falls back."""
    fits = {"cudnn_batch_norm": OpFit((3e-6, 0, 0), ()), "mkldnn_rnn_layer": OpFit((7e-6, 0, 0), ())}
    model = Calibrated(fits, dict.fromkeys(GROUPS, 1.0), per_op_s=0.0, per_tensor_s=0.0, fixed_s=0.0,
                       fallback=Roofline(1e9, 1e9, 5e-6))
    seconds, unknown = model.step_seconds(Step((op("native_batch_norm"), op("_cudnn_rnn"),
                                                op("native_batch_norm_backward")), tensors=0))
    assert seconds == pytest.approx(3e-6 + 7e-6 + 5e-6)
    assert unknown == {"native_batch_norm_backward": 1}
    assert SAME_WORK["cudnn_batch_norm_backward"] == "native_batch_norm_backward"


def test_a_grouped_convolution_is_its_own_op_and_else_the_dense_ones():
    """A calibration with grouped convolutions' own fit predicts them by it; one without (a file written before
    they had their own names) by the dense convolution's, never the fallback."""
    fallback = Roofline(1e9, 1e9, 5e-6)
    dense, grouped = OpFit((3e-6, 0, 0), ()), OpFit((7e-6, 0, 0), ())
    both = Calibrated({"convolution": dense, "convolution_grouped": grouped}, dict.fromkeys(GROUPS, 1.0), 0.0, 0.0,
                      0.0, fallback)
    older = Calibrated({"convolution": dense}, dict.fromkeys(GROUPS, 1.0), 0.0, 0.0, 0.0, fallback)
    step = Step((op("convolution"), op("convolution_grouped")), tensors=0)
    assert both.step_seconds(step) == (pytest.approx(3e-6 + 7e-6), {})
    assert older.step_seconds(step) == (pytest.approx(3e-6 + 3e-6), {})
    assert group_of(op("convolution_backward_grouped")) == "conv"


def test_groups():
    assert group_of(op("convolution_backward")) == "conv"
    assert group_of(op("addmm")) == "matmul"
    assert group_of(op("mkldnn_rnn_layer")) == "recurrent"
    assert group_of(op("native_batch_norm")) == "norm"
    assert group_of(op("max_pool2d_with_indices")) == "pool"
    assert group_of(op("mul", nbytes=4 << 20)) == "memory"
    assert group_of(op("mul", nbytes=1024)) == "small"
