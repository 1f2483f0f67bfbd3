"""The whole scenario: its sections, and the checks that span several of them."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeInt, model_validator

from testbed.schema.algorithms import Algorithm, runs_async
from testbed.schema.data import Client, Codec, Data, Model
from testbed.schema.fleet import Fleet, Server
from testbed.schema.network import Network
from testbed.schema.protocol import Protocol, SyncProtocol
from testbed.schema.resources import Resources
from testbed.schema.selection import Selection
from testbed.schema.run import Checkpointing, DeviceState, Eval, Executor, Round, SerialExecutor, Stop
from testbed.schema.common import Strict


class Scenario(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")   # becomes a folder name
    description: str = ""
    seed: NonNegativeInt = 0
    data: Data
    model: Model
    fleet: Fleet
    server: Server = Server()
    protocol: Protocol = SyncProtocol()
    round: Round | None = None                # synchronous rounds; an asynchronous protocol does not use it
    client: Client
    algorithm: Algorithm
    # the default, uniform without options, is not checked: that would import the selection rules (and numpy)
    # for a scenario whose other sections may be wrong
    selection: Selection = Field(default_factory=Selection.model_construct,
                                 exclude_if=lambda s: s.uniform and not s.options)
    codec: Codec = Codec()
    stop: Stop = Stop()
    eval: Eval = Eval()
    device_state: DeviceState = DeviceState()
    checkpoint: Checkpointing = Checkpointing()
    executor: Executor = SerialExecutor()
    resources: Resources = Resources()
    network: Network | None = Field(default=None, exclude_if=lambda n: n is None)   # None: private links
    # the clock of a device's compute phase: counted FLOPs over its FLOP/s (the papers'), or the predicted time of
    # the steps it runs (testbed/latency/clock.py); left out of resolved scenarios at the default
    compute: Literal["flops", "latency"] = Field(default="flops", exclude_if=lambda c: c == "flops")

    @property
    def batteries_on(self) -> bool:
        return any(g.battery for g in self.fleet.groups)

    @property
    def energy_on(self) -> bool:
        """Energy is accounted when asked for, or where a battery needs it."""
        return self.resources.energy or self.batteries_on

    @property
    def memory_on(self) -> bool:
        """Memory limits hold when asked for, or where a group sets its devices' memory."""
        return self.resources.memory or any(g.memory_MB is not None for g in self.fleet.groups)

    @property
    def clients_per_round(self) -> int:
        """K, the one name for it everywhere (round.clients_per_round, Build.clients_per_round, a selector's
        init): the updates a round waits for (sync, and each edge round of hierarchical aggregation), or the
        buffer (async; the concurrency where only a period triggers aggregation)."""
        if self.protocol.kind != "async":   # sync, and each edge round of hierarchical aggregation
            return self.round.clients_per_round
        return self.protocol.buffer_size or self.protocol.concurrency

    @property
    def selection_rounds(self) -> int:
        """The rounds a selector picks for (its bind): stop.max_rounds, each of edge_rounds edge rounds in
        hierarchical aggregation."""
        return self.stop.max_rounds * (self.protocol.edge_rounds if self.protocol.kind == "hierarchical" else 1)

    @model_validator(mode="after")
    def _local_steps_where_counted(self):
        if self.algorithm.needs_local_steps() and self.client.local_steps is None:
            raise ValueError(f"client.local_steps: {self.algorithm.name} counts its local steps (FedLion's uplink "
                             "packs sums of E signs); set client.local_steps, e.g. 10")
        return self

    @model_validator(mode="after")
    def _server_data_where_used(self):
        if self.algorithm.needs_server_data() and self.data.server is None:
            raise ValueError(f"data.server: {self.algorithm.name} trains on the server's own data; add "
                             "data.server, e.g. {fraction: 0.1, classes: 5}")
        return self

    @model_validator(mode="after")
    def _protocol_fits(self):
        if self.protocol.kind in ("sync", "hierarchical"):
            if self.round is None:
                raise ValueError("round: required for synchronous rounds; add round: {clients_per_round: 10}")
            return self   # a deadline the selector needs: asked of it where it is built (testbed/validation.py)
        if not self.selection.selector_class().ASYNC:
            raise ValueError(f"selection: '{self.selection.name}' picks a synchronous round's participants "
                             "together and cannot pick for asynchronous dispatch; use protocol kind sync, or "
                             "another selection")
        if self.resources.idle_energy:
            raise ValueError("resources.idle_energy: an asynchronous device never waits for a round to close, so it "
                             "has no idle phase; remove idle_energy")
        if self.protocol.concurrency > self.fleet.size:
            raise ValueError(f"protocol.concurrency: {self.protocol.concurrency} is more than the fleet's "
                             f"{self.fleet.size} devices; lower it or add devices to fleet.groups")
        rules = self.algorithm.asynchronous()
        if "buffered" not in rules:
            runs = ", ".join(runs_async())
            raise ValueError(f"protocol: {self.algorithm.name} cannot run asynchronously (its server step needs a "
                             f"round's participants together); use protocol kind sync, or one of: {runs}")
        if self.protocol.mixing is not None and "mixing" not in rules:
            raise ValueError(f"protocol.mixing: FedAsync's mixture needs a server that adds the update as it is "
                             f"(fedavg, fedprox), not {self.algorithm.name}'s; remove mixing to run FedBuff")
        return self

    @model_validator(mode="after")
    def _latency_has_figures(self):
        """compute: latency predicts each group's steps from its profile's calibration or roofline figures."""
        if self.compute != "latency":
            return self
        profiles = self.fleet.profiles
        for i, g in enumerate(self.fleet.groups):
            profile = profiles[g.profile]
            missing = profile.missing_roofline
            if missing:
                raise ValueError(f"fleet.groups.{i}.profile: {g.profile} has no {missing[0]} for compute: latency; "
                                 "calibrate the device (testbed calibrate --out FILE) and list FILE in "
                                 "fleet.catalog, or give the profile memory_Bps and call_overhead_s with sources")
        return self

    @model_validator(mode="after")
    def _network_fits_fleet(self):
        if self.network is None:
            return self
        self.network.check_groups(len(self.fleet.groups))
        for i, g in enumerate(self.fleet.groups):
            for field, what in (("battery", "a battery's empty instant"), ("bandwidth", "a fluctuating link rate")):
                if getattr(g, field) is not None:
                    raise ValueError(f"fleet.groups.{i}.{field}: shared links (network:) do not yet combine with "
                                     f"{what}; remove fleet.groups.{i}.{field} or the network section")
        return self

    @model_validator(mode="after")
    def _hierarchy_fits(self):
        """Hierarchical aggregation: every device in a cell whose kind has a backhaul, and a cloud rule that takes
        the edges' model deltas as updates (a selection that needs no probe: testbed/validation.py's
        selector_of)."""
        if self.protocol.kind != "hierarchical":
            return self
        if self.network is None:
            raise ValueError("network: hierarchical aggregation needs cells, whose edge servers the devices report "
                             "to; add network.cells, e.g. [{count: 10, down_Bps: 1.9e7, up_Bps: 6.5e6, groups: [0], "
                             "backhaul: {down_Bps: 1.25e6, up_Bps: 1.25e6, latency_s: 0.05}}]")
        in_cells = {g for cell in self.network.cells for g in cell.groups}
        for i in range(len(self.fleet.groups)):
            if i not in in_cells:
                raise ValueError(f"fleet.groups.{i}: its devices are in no cell, and hierarchical aggregation has "
                                 f"them report to their cell's edge server; add {i} to a network.cells kind's groups")
        for k, cell in enumerate(self.network.cells):
            if cell.backhaul is None:
                raise ValueError(f"network.cells.{k}.backhaul: its edge servers need a link to the cloud; add "
                                 "backhaul: {down_Bps: ..., up_Bps: ..., latency_s: ...}")
        if "buffered" not in self.algorithm.asynchronous():
            raise ValueError(f"protocol: the cloud aggregates the edges' model deltas as updates, which "
                             f"{self.algorithm.name}'s server cannot take; use protocol kind sync, or one of: "
                             f"{', '.join(runs_async())}")
        return self   # a selection that needs a probe: asked of the selector where it is built (validation.py)

    @model_validator(mode="after")
    def _k_fits_fleet(self):
        if self.round is None:
            return self
        if self.round.clients_per_round > self.fleet.size:
            raise ValueError(f"round.clients_per_round: {self.round.clients_per_round} is more than the fleet's "
                             f"{self.fleet.size} devices; lower it or add devices to fleet.groups")
        return self
