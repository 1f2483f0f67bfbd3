"""testbed calibrate: a short calibration of this machine writes a device file a scenario can use."""
import pytest

import testbed
from devices import load_device_catalog
from testbed.cli import main
from testbed.latency.networks import workloads


def test_a_short_calibration_writes_a_usable_device_file(tmp_path):
    path = testbed.calibrate(tmp_path / "here.yaml", budget=10, quiet=True, name="here")
    profile = load_device_catalog(path).profiles["here"]
    model = profile.latency
    assert model.machine["threads"] == 1 and model.machine["networks"] > 5 and model.machine["rounds"] >= 1
    for name in ("convolution", "convolution_backward", "addmm", "_log_softmax"):
        assert name in model.ops
    assert all(s > 0 for s in model.scale.values()) and model.fixed_s >= 0
    import torch
    from torch import nn
    seconds = testbed.step_time(nn.Linear(8, 4), torch.zeros(1, 8), 16, path)
    assert 0 < seconds < 0.1


def test_a_network_the_device_cannot_run_is_left_out_and_named(monkeypatch, capsys):
    """A layer this device's torch cannot run (here: one that raises, as cuDNN's LSTM flattening once did on a
    GPU) costs that network, not the calibration."""
    import torch
    from torch import nn

    import testbed.latency.calibration as calibration
    from testbed.latency.networks import Workload

    class Broken(nn.Linear):
        def forward(self, x):
            raise RuntimeError("no kernel for this layer here\nsecond line")

    def drawn(seed):
        yield Workload(nn.Linear(4, 2), torch.zeros(1, 4), 8, "fine a")
        yield Workload(Broken(4, 2), torch.zeros(1, 4), 8, "broken")
        yield from (Workload(nn.Linear(4, 2), torch.zeros(1, 4), 8, f"fine {i}") for i in range(20))

    monkeypatch.setattr(calibration, "workloads", drawn)
    nets = calibration.new_networks(1e-9, "cpu", 0.0)
    assert [m.work.label for m in nets][:3] == ["fine a", "fine 0", "fine 1"]
    assert len(nets) == calibration.MIN_NETWORKS
    err = capsys.readouterr().err
    assert "calibration: left out broken: no kernel for this layer here\n" in err and "second line" not in err


def test_the_networks_are_drawn_the_same_way_each_time():
    first = [w.label for w, _ in zip(workloads(0), range(12))]
    again = [w.label for w, _ in zip(workloads(0), range(12))]
    assert first == again and len(set(first)) > 6


@pytest.mark.parametrize("flags, message", [
    (["--budget", "3"], "--budget: 3.0 seconds; give between 10 and 86400"),
    (["--out", "x.csv"], "a device file is YAML"),
    (["--device", "cuda"], "--device cuda: torch sees no CUDA device here"),
])
def test_bad_flags_are_one_line(tmp_path, capsys, flags, message):
    import torch
    if "cuda" in flags and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    args = ["calibrate", "--out", str(tmp_path / "x.yaml"), *flags]
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_the_step_terms_are_recovered_from_exact_steps():
    """Networks whose steps take exactly their ops' times plus known step terms (per op, parameter tensor, module
    call, and fixed): fit() finds those terms, and predicts a network it did not see."""
    from types import SimpleNamespace

    from testbed.latency.calibration import fit
    from testbed.latency.trace import Op, Step

    per_op, per_tensor, per_module, fixed = 1e-6, 4e-6, 2e-5, 9e-5

    def op_time(op):
        return 3e-6 + 2e-10 * op.nbytes

    def network(i):
        ops = tuple(Op("add", 0, 1000 * (1 + (i * k) % 7), (1,) * 8) for k in range(3 + i % 5))
        step = Step(ops, tensors=1 + i % 3, modules=2 + (i * 3) % 11)
        seconds = (sum(map(op_time, ops)) + per_op * len(ops) + per_tensor * step.tensors
                   + per_module * step.modules + fixed)
        return SimpleNamespace(trace=step, fastest=SimpleNamespace(best={"step": seconds}),
                               samples=lambda: [(o, op_time(o)) for o in ops])

    model = fit([network(i) for i in range(40)], {})
    assert (model.per_op_s, model.per_tensor_s, model.per_module_s, model.fixed_s) == pytest.approx(
        (per_op, per_tensor, per_module, fixed), rel=1e-6)
    unseen = network(41)
    assert model.step_seconds(unseen.trace)[0] == pytest.approx(unseen.fastest.best["step"], rel=1e-9)
