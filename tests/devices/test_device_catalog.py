import pytest

from devices import CATALOG, FEDLPS_TIERS, get_profile

REQUIRED = [
    "raspberry_pi_4",
    "jetson_nano",
    "jetson_tx2",
    "jetson_xavier_nx",
    "phone_low",
    "phone_mid",
    "phone_high",
    "fedlps_adreno630",
]


def test_catalog_has_the_required_devices_with_sources():
    assert len(CATALOG) >= 9
    assert set(REQUIRED) <= set(CATALOG)
    for name, profile in CATALOG.items():
        assert profile.name == name
        assert profile.source.strip()


def test_fedlps_device_matches_the_paper():
    device = get_profile("fedlps_adreno630")
    assert device.peak_flops == 727e9
    assert device.efficiency == 1.0
    assert device.up_Bps == 14.0 * 2**20
    assert device.down_Bps == 110.6 * 2**20
    assert device.train_flops_per_s == 727e9


def test_fedlps_tiers():
    assert FEDLPS_TIERS == (1.0, 0.5, 0.25, 0.125, 0.0625)


def test_sourced_figures_by_hand():
    assert get_profile("jetson_nano").peak_flops == 236e9
    assert get_profile("jetson_xavier_nx").peak_flops == 845e9
    high = get_profile("phone_high")
    assert high.down_Bps == pytest.approx(166e6 / 8)  # 5G median, Mbit/s -> bytes/s
    assert high.up_Bps == pytest.approx(21e6 / 8)
    assert get_profile("phone_low").down_Bps == pytest.approx(6.1e6 / 8)


def test_training_is_far_below_peak_except_for_fedlps():
    for name, profile in CATALOG.items():
        if name != "fedlps_adreno630":
            assert profile.efficiency <= 0.5, name


def test_unknown_profile_lists_the_choices_on_one_line():
    with pytest.raises(KeyError) as error:
        get_profile("toaster")
    message = error.value.args[0]
    assert message == "unknown device profile 'toaster'; choose one of: " + ", ".join(sorted(CATALOG))
    assert "\n" not in message
