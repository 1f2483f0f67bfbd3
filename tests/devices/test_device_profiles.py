import dataclasses
import math
import subprocess
import sys

import pytest

from devices import DeviceProfile


def make(**overrides):
    fields = dict(
        name="board", peak_flops=100e9, efficiency=0.25, up_Bps=1e6, down_Bps=4e6, latency_s=0.01, source="test"
    )
    return DeviceProfile(**{**fields, **overrides})


def test_train_flops_per_s_is_peak_times_efficiency():
    assert make().train_flops_per_s == 25e9


@pytest.mark.parametrize("field", ["peak_flops", "up_Bps", "down_Bps"])
@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, True, "fast"])
def test_rates_must_be_finite_and_positive(field, bad):
    with pytest.raises(ValueError, match=field):
        make(**{field: bad})


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, math.nan])
def test_efficiency_must_lie_in_zero_one(bad):
    with pytest.raises(ValueError, match="efficiency"):
        make(efficiency=bad)


def test_efficiency_one_and_zero_latency_are_valid():
    profile = make(efficiency=1, latency_s=0)
    assert profile.efficiency == 1.0 and profile.latency_s == 0.0


@pytest.mark.parametrize("bad", [-0.001, math.inf, math.nan])
def test_latency_must_be_finite_and_not_negative(bad):
    with pytest.raises(ValueError, match="latency_s"):
        make(latency_s=bad)


def test_name_must_be_given():
    with pytest.raises(ValueError, match="name"):
        make(name="")


def test_numbers_are_stored_as_floats():
    assert type(make(peak_flops=10).peak_flops) is float


def test_scaled_multiplies_only_the_peak():
    half = make().scaled(0.5)
    assert half.peak_flops == 50e9
    assert half.train_flops_per_s == 12.5e9
    assert (half.efficiency, half.up_Bps, half.down_Bps, half.latency_s) == (0.25, 1e6, 4e6, 0.01)
    assert half.name == "board@0.5"


@pytest.mark.parametrize("bad", [0, -1, math.nan])
def test_scaled_rejects_a_capability_that_is_not_positive(bad):
    with pytest.raises(ValueError, match="capability"):
        make().scaled(bad)


def test_with_overrides_replaces_and_validates():
    assert make().with_overrides(up_Bps=2e6).up_Bps == 2e6
    with pytest.raises(ValueError, match="efficiency"):
        make().with_overrides(efficiency=2)
    with pytest.raises(ValueError, match="unknown DeviceProfile field 'speed'"):
        make().with_overrides(speed=1)


def test_profiles_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        make().peak_flops = 1.0


def test_devices_imports_no_heavy_dependency():
    code = "import sys, devices; print(sorted({'torch', 'simpy', 'pydantic'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
