"""The server's own side of a run: a part of the kit (kit.py), its `server`.

- `begin`: the server state a run starts from: the strategy's initial state (checked by its contract), or a
  checkpoint's, with what the checkpoint restores (the devices' kept state, their resources, the participation's
  record, the shared links' transfers still under way, the selection and strategy streams) and what the protocol
  kept there, on the server's device; a checkpoint whose values do not restore (damaged) is refused in one line.
- `aggregate`: the strategy's aggregation, checked by its contract: every protocol's one way to aggregate.
- `compute`: the server's own compute after aggregating (a strategy's metrics["server_flops"]) on the server
  profile's clock, as rows of events.csv (device SERVER, phase "server").
- `placement`: where the server's tensors live (testbed/execution/placement.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Generator

import numpy as np
import simpy

from testbed import migrations
from testbed.algorithms.base import Arrival, Failure, Params, ServerState, Strategy
from testbed.checkpoint import FILE, Checkpoint
from testbed.contracts import Contracts
from testbed.errors import TestbedError
from testbed.execution.placement import Placement
from testbed.flops import compute_seconds
from testbed.network.linklog import LinkLog
from testbed.protocols.participation import Participation
from testbed.resources import Resources
from testbed.store import ClientStore

SERVER = -1  # the device column of the server's own work in events.csv (phase "server")


@dataclass(frozen=True)
class Start:
    """Where a run begins: fresh, or where a checkpoint left it."""

    state: ServerState
    played: int      # the last round (aggregation) played: 0 when fresh
    resumed: bool    # from a checkpoint
    finished: bool   # the checkpoint is the run's end: nothing is left to play
    protocol: dict   # what the protocol kept in the checkpoint (async: its AsyncState); {} when fresh


@dataclass(frozen=True)
class Restored:
    """What a checkpoint restores besides the server's state: the run's parts that keep a record of their own."""

    participation: Participation
    resources: Resources
    links: LinkLog
    streams: tuple[np.random.Generator, np.random.Generator]   # the selection and strategy streams


class Server:
    """The server of one run. `params`: the initial model, on the server's device; `device_state`: what devices
    keep between rounds (left open after the run, so the final state stays readable); `flops_per_s`: the server
    profile's; `checkpoint`: the one the run goes on from, None when fresh."""

    def __init__(self, strategy: Strategy, contracts: Contracts, placement: Placement, params: Params,
                 device_state: ClientStore, flops_per_s: float, checkpoint: Checkpoint | None, restored: Restored):
        self.placement = placement
        self._strategy, self._contracts, self._params, self._device_state = strategy, contracts, params, device_state
        self._flops_per_s, self._checkpoint, self._restored = flops_per_s, checkpoint, restored

    def begin(self) -> Start:
        """The server state to start from: fresh, or the checkpoint's, with the streams, the devices' kept state
        and their resources restored."""
        start = self._checkpoint
        if start is None:
            state = self._contracts.state(self._strategy.init(self._params), "init")
            return Start(replace(state, clients=self._device_state), 0, False, False, {})
        try:
            return self._resumed(start)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
            # a checkpoint that loads (its pickle whole) may still hold damaged values: a key, a state of the wrong form
            raise TestbedError(f"{FILE} is damaged ({type(err).__name__}: {err}); run without --resume to start "
                               "over") from None

    def _resumed(self, start: Checkpoint) -> Start:
        """The checkpoint's server state, with what it restores besides."""
        restored = self._restored
        if "selection" in start.protocol:
            restored.participation.resume(start.protocol["selection"])
        self._device_state.update(start.state.clients)
        restored.resources.restore(start.resources)
        # an aggregation's transfers still under way
        restored.links.pending, flows = migrations.link_rows(start.protocol, start.now)
        if restored.links.flows is not None:
            restored.links.flows.restore(flows)
        selection, strategy_rng = restored.streams
        selection.bit_generator.state = start.selection
        strategy_rng.bit_generator.state = start.strategy_rng
        state = self.placement.to_server(replace(start.state, clients=self._device_state))
        return Start(state, start.round, True, start.finished, self.placement.here(start.protocol))

    def aggregate(self, state: ServerState, r: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict]:
        """Aggregation r: the strategy's new state and metrics, checked by its contract."""
        return self._contracts.aggregated(self._strategy.aggregate(state, r, arrivals, failures), r)

    def compute(self, env: simpy.Environment, r: int, flops: int) -> Generator[simpy.Event, None, list[dict]]:
        """simpy process: the server's own compute after aggregating (FedDU's steps on its data, FedAP's pruning),
        on the server profile's clock before the next round; returns its event rows."""
        if not flops:
            return []
        start = env.now
        yield env.timeout(compute_seconds(flops, self._flops_per_s))
        return [{"device": SERVER, "round": r, "phase": "server", "start_s": start, "end_s": env.now,
                 "outcome": "done", "ratio": math.nan}]
