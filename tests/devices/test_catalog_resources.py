"""Every catalog profile carries sourced power (train/up/down/idle watts) and memory figures."""
import math

import pytest

from devices import CATALOG
from devices.profiles import POWER_FIELDS, RESOURCE_FIELDS

BOARDS = ("raspberry_pi_4", "jetson_nano", "jetson_tx2", "jetson_xavier_nx")
PHONES = ("phone_low", "phone_mid", "phone_high", "fedlps_adreno630")


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_resource_figure_is_set_finite_and_positive(name):
    profile = CATALOG[name]
    for field in RESOURCE_FIELDS:
        value = getattr(profile, field)
        assert value is not None, f"{name}.{field} is unset"
        assert math.isfinite(value) and value > 0, f"{name}.{field} = {value!r}"


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_training_draws_more_than_idle_and_links_at_least_idle(name):
    profile = CATALOG[name]
    assert profile.train_W > profile.idle_W
    assert profile.up_W >= profile.idle_W and profile.down_W >= profile.idle_W


def test_phones_have_less_memory_than_the_largest_board():
    largest_board = max(CATALOG[name].memory_bytes for name in BOARDS)
    for name in PHONES:
        assert CATALOG[name].memory_bytes < largest_board, name


def test_phones_draw_less_than_boards_and_the_server_most():
    assert max(CATALOG[name].train_W for name in PHONES) < min(CATALOG[name].train_W for name in BOARDS)
    server = CATALOG["server_a100"]
    assert all(server.train_W > profile.train_W for name, profile in CATALOG.items() if name != "server_a100")


def test_memory_fits_in_the_device():
    assert CATALOG["raspberry_pi_4"].memory_bytes < 4 * 2**30  # the 4 GB variant
    assert CATALOG["jetson_nano"].memory_bytes < 4 * 2**30
    assert CATALOG["server_a100"].memory_bytes <= 40 * 2**30


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_source_names_its_power_and_memory_figures(name):
    source = CATALOG[name].source
    assert "power" in source
    assert " W " in source or " W," in source or " W;" in source
    assert "RAM" in source or "memory" in source


def test_power_fields_are_the_four_phases():
    assert POWER_FIELDS == ("train_W", "up_W", "down_W", "idle_W")
