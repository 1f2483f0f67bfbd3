"""The scenario's `network:` section: links that devices share (testbed/network/).

    network:
      server: {down_Bps: 1.25e8, up_Bps: 1.25e8}        # its egress (every download) and ingress (every upload)
      cells:
        - {name: lte, count: 10, down_Bps: 1.9e7, up_Bps: 6.5e6, groups: [0, 1]}

A cell kind holds the devices of the fleet groups it names (by index in fleet.groups), dealt to its `count`
cells in turn, in device order: the j-th of its devices (its groups' devices one group after another) is in cell
j mod count. A device of a group no cell names has no cell; every transfer crosses the server's link of its
direction where one is given. `backhaul` is a cell's edge server's link to the cloud, used by hierarchical
aggregation (protocol kind hierarchical). Without the section every device has links of its own.
"""
from __future__ import annotations

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from testbed.schema.common import Strict


class ServerLinks(Strict):
    down_Bps: PositiveFloat | None = None   # egress, shared by every download; None: it never limits
    up_Bps: PositiveFloat | None = None     # ingress, shared by every upload


class Backhaul(Strict):
    down_Bps: PositiveFloat                 # cloud -> edge server
    up_Bps: PositiveFloat                   # edge server -> cloud
    latency_s: NonNegativeFloat = 0.0


class CellKind(Strict):
    name: str = Field(default="cell", pattern=r"^[A-Za-z0-9_.-]+$")
    count: PositiveInt = 1
    down_Bps: PositiveFloat                 # the cell's downlink, shared by its devices' downloads
    up_Bps: PositiveFloat                   # its uplink, shared by their uploads
    groups: list[NonNegativeInt] = Field(min_length=1)   # fleet.groups indices whose devices it holds
    backhaul: Backhaul | None = None
    source: str = ""                        # where the capacities come from


class Network(Strict):
    cells: list[CellKind] = Field(default_factory=list)
    server: ServerLinks = ServerLinks()

    def check_groups(self, n_groups: int) -> None:
        """Every named group exists and is in one cell kind at most (ValueError naming the field)."""
        seen: dict[int, int] = {}
        for k, cell in enumerate(self.cells):
            for g in cell.groups:
                if g >= n_groups:
                    raise ValueError(f"network.cells.{k}.groups: there is no fleet.groups.{g} (the fleet has "
                                     f"{n_groups} groups, 0 to {n_groups - 1}); name one of those")
                if g in seen:
                    raise ValueError(f"network.cells.{k}.groups: fleet.groups.{g} is already in "
                                     f"network.cells.{seen[g]}; a group's devices sit in one kind of cell")
                seen[g] = k
