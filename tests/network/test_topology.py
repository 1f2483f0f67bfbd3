"""The `network:` section: validation in one line, devices dealt to cells by hand, off by default."""
import copy

import numpy as np
import pytest

import testbed.data
from helpers import TWO_DEVICES, tiny_blobs, tiny_scenario
from testbed import scenario as sc
from testbed.errors import TestbedError
from testbed.network.topology import Topology
from testbed.schema.network import Network


@pytest.fixture(autouse=True)
def blobs(monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)


def three_groups(network: dict | None = None) -> dict:
    raw = tiny_scenario({"name": "fedavg"})
    groups = copy.deepcopy(TWO_DEVICES["fleet"]["groups"])
    raw["fleet"] = {"groups": [groups[0] | {"count": 3}, groups[1] | {"count": 2}, groups[0] | {"count": 1}]}
    return raw | ({"network": network} if network else {})


def test_devices_are_dealt_to_a_kinds_cells_group_after_group():
    # groups: devices 0-2 (group 0), 3-4 (group 1), 5 (group 2); the kind lists group 1 first: its devices take
    # places 0, 1 (cells 0, 1), then group 0's places 2, 3, 4 (cells 0, 1, 0); group 2 has no cell
    net = Network(cells=[{"name": "lte", "count": 2, "down_Bps": 10, "up_Bps": 5, "groups": [1, 0]}],
                  server={"up_Bps": 100})
    topo = Topology.build(net, np.array([0, 0, 0, 1, 1, 2]))
    assert topo.cell.tolist() == [0, 1, 0, 0, 1, -1]
    assert topo.names == ("lte.0", "lte.1")
    # links: the two cells, their backhauls (none: infinite), the server
    assert topo.capacity["down"].tolist() == [10, 10, np.inf, np.inf, np.inf]
    assert topo.capacity["up"].tolist() == [5, 5, np.inf, np.inf, 100]
    # downloads cross no server link (no egress given) and no backhaul; uploads cross the ingress, index 4
    assert topo.links(np.array([5, 3]), "down").tolist() == [[-1, -1, -1], [0, -1, -1]]
    assert topo.links(np.array([5, 3]), "up").tolist() == [[-1, -1, 4], [0, -1, 4]]
    assert topo.links(np.array([5, 3]), "up", server=False).tolist() == [[-1, -1, -1], [0, -1, -1]]
    assert [topo.link_name(i) for i in range(5)] == ["lte.0", "lte.1", "lte.0.backhaul", "lte.1.backhaul", "server"]


def test_a_backhaul_is_crossed_on_the_way_to_the_server_not_to_the_edge():
    net = Network(cells=[{"name": "a", "down_Bps": 10, "up_Bps": 5, "groups": [0],
                          "backhaul": {"down_Bps": 3, "up_Bps": 2}},
                         {"name": "b", "down_Bps": 10, "up_Bps": 5, "groups": [1]}])
    topo = Topology.build(net, np.array([0, 1]))
    assert topo.capacity["up"].tolist() == [5, 5, 2, np.inf, np.inf]
    assert topo.links(np.array([0, 1]), "up").tolist() == [[0, 2, -1], [1, -1, -1]]
    assert topo.links(np.array([0, 1]), "up", server=False).tolist() == [[0, -1, -1], [1, -1, -1]]


def test_off_by_default_and_out_of_the_resolved_scenario():
    s = sc.validate(three_groups(), "test")
    assert s.network is None and "network" not in s.model_dump(mode="json")
    on = sc.validate(three_groups({"cells": [{"down_Bps": 1e6, "up_Bps": 1e6, "groups": [0]}]}), "test")
    assert on.model_dump(mode="json")["network"]["cells"][0]["groups"] == [0]


@pytest.mark.parametrize("network, message", [
    ({"cells": [{"down_Bps": 1e6, "up_Bps": 1e6, "groups": [3]}]},
     "network.cells.0.groups: there is no fleet.groups.3 (the fleet has 3 groups, 0 to 2)"),
    ({"cells": [{"down_Bps": 1, "up_Bps": 1, "groups": [0]}, {"down_Bps": 1, "up_Bps": 1, "groups": [1, 0]}]},
     "network.cells.1.groups: fleet.groups.0 is already in network.cells.0"),
    ({"cells": [{"down_Bps": 0, "up_Bps": 1, "groups": [0]}]}, "network.cells.0.down_Bps"),
    ({"server": {"ingress": 5}}, "network.server.ingress: unknown key"),
])
def test_a_bad_network_is_refused_in_one_line(network, message):
    with pytest.raises(TestbedError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        sc.validate(three_groups(network), "test")
    assert "\n" not in str(err.value)


def test_batteries_do_not_combine_yet():
    raw = three_groups({"cells": [{"down_Bps": 1e6, "up_Bps": 1e6, "groups": [0]}]})
    raw["fleet"]["groups"][1]["battery"] = {"capacity_Wh": 10}
    with pytest.raises(TestbedError, match="fleet.groups.1.battery: shared links"):
        sc.validate(raw, "test")
