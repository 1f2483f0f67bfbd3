"""What a run is made of, once built: the Experiment that testbed/build.py (the composition root) returns, and the
random streams every part draws from. Here, below the protocols and the engine, so that they can name what they
are handed without importing what builds it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:   # names for the fields' types; nothing is imported at run time
    import devices
    import torch
    from testbed.algorithms.base import Strategy
    from testbed.contracts import Contracts
    from testbed.data import Dataset
    from testbed.data.clients import ClientData
    from testbed.data.server import SharedData
    from testbed.schema.scenario import Scenario
    from testbed.selection import Selector


class Purpose:
    """Independent random streams, one per purpose, spawned from the scenario seed."""

    FLEET, SELECTION, TRAINING, MODEL_INIT, PARTITION, CLIENT_SPLIT, EVALUATION, STRATEGY, SERVER_DATA = range(9)


def stream(seed: int, *key: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(seed, spawn_key=key)


@dataclass
class Experiment:
    """One scenario's live objects. `selector` is the `selection:` section's, `staleness` the asynchronous
    protocol's s(tau) (None for the other protocols), `contracts` the checks of the plugins among them
    (testbed/contracts.py)."""

    scenario: Scenario
    dataset: Dataset
    clients: ClientData
    model: torch.nn.Module
    fleet: devices.Fleet
    strategy: Strategy
    executor: object       # testbed/execution/: trains the tasks whose updates the server uses
    selector: Selector
    contracts: Contracts
    staleness: Callable[[int], float] | None = None
    shared: SharedData | None = None   # the server's own data (data.server)
