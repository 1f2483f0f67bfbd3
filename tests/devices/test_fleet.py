import numpy as np
import pytest

from devices import FEDLPS_TIERS, AlwaysOn, DeviceProfile, Fleet, GroupSpec, MarkovOnOff, get_profile

SEED = np.random.SeedSequence(11)


def build(seed=SEED):
    return Fleet.build(
        [
            GroupSpec(get_profile("phone_low"), 3, tiers=FEDLPS_TIERS, resample_tiers_each_round=True),
            GroupSpec(get_profile("jetson_nano"), 2, MarkovOnOff(10, 10, start="off"), tiers=(1.0, 0.5)),
            GroupSpec(get_profile("raspberry_pi_4"), 1),
        ],
        seed,
    )


def test_devices_are_numbered_in_group_order():
    fleet = build()
    assert fleet.n == 6
    assert fleet.group.tolist() == [0, 0, 0, 1, 1, 2]
    assert fleet.profile_name.tolist() == ["phone_low"] * 3 + ["jetson_nano"] * 2 + ["raspberry_pi_4"]
    assert fleet.peak_flops.tolist() == [50e9] * 3 + [236e9] * 2 + [8e9]
    assert fleet.efficiency.tolist() == [0.04] * 3 + [0.2] * 2 + [0.25]
    assert fleet.down_Bps[3] == get_profile("jetson_nano").down_Bps
    assert fleet.up_Bps[0] == get_profile("phone_low").up_Bps
    assert fleet.latency_s[5] == get_profile("raspberry_pi_4").latency_s
    assert fleet.availability.online_at(0.0).tolist() == [True, True, True, False, False, True]


def test_arrays_are_read_only():
    with pytest.raises(ValueError):
        build().peak_flops[0] = 1.0


def test_tier_at_is_a_pure_function_of_seed_and_round():
    forward, backward = build(), build()
    ahead = [forward.tier_at(r) for r in range(10)]
    behind = [backward.tier_at(r) for r in reversed(range(10))][::-1]
    for a, b in zip(ahead, behind):
        assert np.array_equal(a, b)
    assert np.array_equal(forward.tier_at(4), ahead[4])  # asking twice changes nothing


def test_static_tiers_stay_and_dynamic_tiers_change():
    fleet = build()
    rounds = np.array([fleet.tier_at(r) for r in range(20)])
    assert np.all(rounds[:, 3:5] == rounds[0, 3:5])  # the jetsons: drawn once
    assert set(rounds[:, 3:5].ravel()) <= {1.0, 0.5}
    assert len({tuple(row) for row in rounds[:, :3]}) > 1  # the phones: redrawn each round
    assert set(rounds[:, :3].ravel()) <= set(FEDLPS_TIERS)
    assert np.all(rounds[:, 5] == 1.0)  # no tiers: full capability


def test_tiers_change_each_round_only_where_a_group_redraws_them():
    assert build().tiers_change_each_round  # the phones redraw theirs
    static = Fleet.build([GroupSpec(get_profile("jetson_nano"), 2, tiers=(1.0, 0.5)),
                          GroupSpec(get_profile("raspberry_pi_4"), 1)], SEED)
    assert not static.tiers_change_each_round
    # what the kit relies on to build the FLOP/s array once: every round's is the same
    assert all(np.array_equal(static.train_flops_per_s(r), static.train_flops_per_s(0)) for r in range(1, 20))


def test_tiers_depend_on_the_seed():
    one = np.array([build().tier_at(r)[:3] for r in range(10)])
    other = np.array([build(np.random.SeedSequence(12)).tier_at(r)[:3] for r in range(10)])
    assert not np.array_equal(one, other)


def test_train_flops_per_s_by_hand():
    profile = DeviceProfile("toy", peak_flops=100.0, efficiency=0.5, up_Bps=1.0, down_Bps=1.0, latency_s=0.0,
                            source="test")
    fleet = Fleet.build([GroupSpec(profile, 2, tiers=(0.25,)), GroupSpec(profile, 1)], SEED)
    assert fleet.train_flops_per_s(0).tolist() == [12.5, 12.5, 50.0]
    tiers = build().tier_at(3)
    assert build().train_flops_per_s(3)[3] == 236e9 * 0.2 * tiers[3]


@pytest.mark.parametrize(
    "spec, field",
    [
        (dict(count=0), "count"),
        (dict(count=2.0), "count"),
        (dict(tiers=()), "tiers"),
        (dict(tiers=(1.0, 1.5)), "tiers"),
        (dict(tiers=(0.0,)), "tiers"),
        (dict(resample_tiers_each_round=True), "resample_tiers_each_round"),
        (dict(availability="always"), "availability"),
    ],
)
def test_bad_group_specs_are_rejected(spec, field):
    with pytest.raises(ValueError, match=field):
        GroupSpec(**{"profile": get_profile("phone_mid"), "count": 1, **spec})


def test_group_defaults():
    spec = GroupSpec(get_profile("phone_mid"), 4)
    assert spec.availability == AlwaysOn() and spec.tiers is None and not spec.resample_tiers_each_round


def test_bad_rounds_and_empty_fleets_are_rejected():
    with pytest.raises(ValueError, match="round_index"):
        build().tier_at(-1)
    with pytest.raises(ValueError, match="at least one group"):
        Fleet.build([], SEED)
