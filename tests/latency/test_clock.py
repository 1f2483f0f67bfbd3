"""testbed/latency/clock.py: step_time, its cache, the fallback line, the shrunk network a task runs."""
import pytest
import torch
from torch import nn

import testbed
from devices.catalog import CATALOG
from devices.latency import GROUPS, Calibrated, OpFit, Roofline
from testbed.latency.clock import FULL, StepClock
from testbed.latency.trace import trace_step
from testbed.payload import Dense, UnitMasked


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 16), nn.ReLU(),
                         nn.Linear(16, 10))


SAMPLE = torch.zeros(1, 1, 8, 8)


def test_step_time_of_a_builtin_profile_is_its_roofline_by_hand():
    pi = CATALOG["raspberry_pi_4"]
    step = trace_step(net(), SAMPLE, 10)
    rate = pi.peak_flops * pi.efficiency
    by_hand = sum(pi.call_overhead_s + max(op.flops / rate, op.nbytes / pi.memory_Bps) for op in step.ops)
    assert testbed.step_time(net(), SAMPLE, 10, "raspberry_pi_4") == pytest.approx(by_hand, rel=1e-12)


def test_bad_arguments_are_one_line():
    with pytest.raises(testbed.TestbedError, match="neither a built-in profile"):
        testbed.step_time(net(), SAMPLE, 10, "no_such_board")
    with pytest.raises(testbed.TestbedError, match="batch_size must be an integer >= 1"):
        testbed.step_time(net(), SAMPLE, 0, "raspberry_pi_4")


def test_predictions_are_cached_per_profile_network_and_batch(monkeypatch):
    clock = StepClock(net(), SAMPLE)
    calls = []
    import testbed.latency.clock as module
    real = module.trace_step
    monkeypatch.setattr(module, "trace_step", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    pi, nano = CATALOG["raspberry_pi_4"], CATALOG["jetson_nano"]
    first = clock.step_seconds(pi, 10)
    assert clock.step_seconds(pi, 10) == first and clock.step_seconds(nano, 10) != first
    clock.step_seconds(pi, 3)
    assert calls == [10, 3]          # one trace per batch size, whatever the profile
    # a task: 4 full batches and a short one of 3
    assert clock.task_seconds(pi, [10, 10, 10, 10, 3]) == pytest.approx(4 * first + clock.step_seconds(pi, 3))


def test_an_op_the_calibration_never_measured_is_charged_by_its_fallback_and_told_once():
    fits = {"addmm": OpFit((1e-5, 0, 0), ())}
    profile = CATALOG["raspberry_pi_4"].with_overrides(
        name="partial", latency=Calibrated(fits, dict.fromkeys(GROUPS, 1.0), 0.0, 0.0, 0.0,
                                           Roofline(1e9, 1e9, 1e-6)))
    lines = []
    clock = StepClock(net(), SAMPLE, report=lines.append)
    clock.step_seconds(profile, 10)
    clock.step_seconds(profile, 4)
    convolution = [line for line in lines if "aten.convolution " in line]
    assert len(convolution) == 1 and "never measured in partial's calibration" in convolution[0]
    assert "charged by its roofline (1 GFLOP/s, 1 GB/s, 1 us a call)" in convolution[0]
    assert len(lines) == len(set(lines))


def test_a_gpu_calibration_on_a_host_without_a_gpu_traces_on_the_cpu_and_says_so_once(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    fits = {"addmm": OpFit((1e-5, 0, 0), ())}
    cpu_fit = Calibrated(fits, dict.fromkeys(GROUPS, 1.0), 0.0, 0.0, 0.0, Roofline(1e9, 1e9, 1e-6),
                         {"processor": "Intel Xeon", "device": "cpu"})
    gpu_fit = Calibrated(fits, dict.fromkeys(GROUPS, 1.0), 0.0, 0.0, 0.0, Roofline(1e9, 1e9, 1e-6),
                         {"processor": "NVIDIA Jetson Orin", "device": "cuda"})
    lines = []
    clock = StepClock(net(), SAMPLE, report=lines.append)
    on_cpu = clock.step_seconds(CATALOG["raspberry_pi_4"].with_overrides(name="cpu_file", latency=cpu_fit), 10)
    orin = CATALOG["raspberry_pi_4"].with_overrides(name="orin", latency=gpu_fit)
    assert clock.step_seconds(orin, 10) == on_cpu and clock.step_seconds(orin, 4) > 0
    gpu = [line for line in lines if "a GPU calibration" in line]
    assert gpu == ["latency clock: orin: a GPU calibration; no GPU here, steps traced on the CPU"]
    assert not any("cpu_file: a GPU" in line for line in lines)


def test_a_structured_submodel_runs_its_shrunk_network_and_a_masked_one_the_dense_shape():
    model = net()
    clock = StepClock(model, SAMPLE)
    assert clock.network_of(Dense()) == FULL   # FedLPS: the whole model comes down, the device masks it
    keep = torch.tensor([True] * 4 + [False] * 4)
    live = keep.repeat_interleave(36)
    shrunk = UnitMasked({"0.weight": keep, "0.bias": keep}, columns={"3.weight": live})
    key = clock.network_of(shrunk)
    small = clock._networks[key]
    assert small[0].weight.shape == (4, 1, 3, 3) and small[3].weight.shape == (16, 4 * 36)
    assert small(torch.zeros(2, 1, 8, 8)).shape == (2, 10)
    step = clock.trace(key, 5)
    conv = next(op for op in step.ops if op.name == "convolution")
    assert conv.flops == 2 * 5 * 4 * 36 * 9   # 4 output channels of 6x6, 3x3x1 kernels, batch 5
