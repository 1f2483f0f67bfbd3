"""A calibrated device file: written, read back the same, and refused in one line where it is wrong."""
import copy

import pytest
import yaml

from devices import load_device_catalog
from devices.latency import GROUPS, Calibrated, OpFit, Roofline, calibration_to_dict
from testbed.latency.device_file import write_device_file

MACHINE = {"processor": "test cpu", "device": "cpu", "threads": 1, "torch": "2.x", "measured": "2026-11-29T00:00:00Z",
           "training_flops_per_s": 5e9}


def calibration() -> Calibrated:
    fits = {"convolution": OpFit((1e-5, 1e-11, 1e-10), (((1.0,) * 10, 0.1), ((2.0,) * 10, -0.2))),
            "add": OpFit((2e-6, 0.0, 3e-11), ())}
    return Calibrated(fits, dict.fromkeys(GROUPS, 1.1), 1e-6, 2e-6, 5e-5, Roofline(1e11, 2e10, 2e-6), MACHINE,
                      per_module_s=7e-6)


def test_written_and_read_back(tmp_path):
    path = write_device_file(tmp_path / "dev.yaml", calibration(), "my_board")
    profile = load_device_catalog(path).profiles["my_board"]
    assert profile.peak_flops == 1e11 and profile.efficiency == pytest.approx(0.05)
    assert profile.memory_Bps == 2e10 and profile.call_overhead_s == 2e-6
    back = profile.latency
    assert back.ops == calibration().ops and back.scale == calibration().scale
    assert (back.per_op_s, back.per_tensor_s, back.per_module_s, back.fixed_s) == (1e-6, 2e-6, 7e-6, 5e-5)
    assert back.fallback == calibration().fallback and back.machine["processor"] == "test cpu"
    assert "measured by testbed calibrate on test cpu" in profile.source
    assert "assumed: testbed calibrate measures compute only" in profile.source   # its links


def _file(tmp_path, change) -> str:
    entry = yaml.safe_load(write_device_file(tmp_path / "dev.yaml", calibration(), "my_board").read_text())[0]
    change(entry)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump([entry]))
    with pytest.raises(ValueError) as err:
        load_device_catalog(path)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_missing_figure(tmp_path):
    message = _file(tmp_path, lambda e: e["latency"]["step"].pop("fixed_s"))
    assert "latency.step.fixed_s: required" in message and "my_board" in message


def test_a_negative_coefficient(tmp_path):
    message = _file(tmp_path, lambda e: e["latency"]["ops"]["add"]["base"].__setitem__(2, -1e-9))
    assert "latency.ops.add.base.2: -1e-09 is not a finite number >= 0" in message


def test_another_versions_format(tmp_path):
    message = _file(tmp_path, lambda e: e["latency"].__setitem__("format", "testbed-latency/0"))
    assert "latency.format: 'testbed-latency/0' is not 'testbed-latency/2' (or 'testbed-latency/1')" in message


def test_a_missing_module_term(tmp_path):
    message = _file(tmp_path, lambda e: e["latency"]["step"].pop("per_module_s"))
    assert "latency.step.per_module_s: required" in message


def test_the_older_format_reads_without_the_module_term(tmp_path):
    """A testbed-latency/1 file (fitted before per_module_s) reads with the term at 0 and its own terms as written:
    the committed docs/latency/dev_vm.yaml predicts what it did."""
    entry = yaml.safe_load(write_device_file(tmp_path / "dev.yaml", calibration(), "my_board").read_text())[0]
    entry["latency"]["format"] = "testbed-latency/1"
    del entry["latency"]["step"]["per_module_s"]
    (tmp_path / "old.yaml").write_text(yaml.safe_dump([entry]))
    back = load_device_catalog(tmp_path / "old.yaml").profiles["my_board"].latency
    assert (back.per_op_s, back.per_tensor_s, back.per_module_s, back.fixed_s) == (1e-6, 2e-6, 0.0, 5e-5)


def test_a_missing_group_scale(tmp_path):
    message = _file(tmp_path, lambda e: e["latency"]["step"]["scale"].pop("conv"))
    assert "latency.step.scale.conv: required" in message


def test_a_roofline_figure_without_its_source(tmp_path):
    message = _file(tmp_path, lambda e: e.pop("memory_Bps_source"))
    assert "memory_Bps_source: every figure needs its source" in message


def test_a_dict_round_trip_is_exact():
    data = calibration_to_dict(calibration())
    assert copy.deepcopy(data) == data and data["format"] == "testbed-latency/2"
