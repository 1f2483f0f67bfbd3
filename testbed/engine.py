"""The engine: one run of a scenario. It builds the run's kit (testbed/protocols/kit.py: what every protocol
shares) and plays the scenario's protocol (testbed/protocols/) on a simpy clock, from the start or from a
checkpoint's instant; the protocol owns the clock, the kit everything else.
"""
from __future__ import annotations

import gc
from typing import Callable

import simpy

from testbed.checkpoint import Checkpoint
from testbed.protocols.asynchronous import run_async
from testbed.protocols.hierarchical import run_hierarchical
from testbed.protocols.kit import Kit
from testbed.protocols.stopping import Ending
from testbed.protocols.sync import run_sync
from testbed.resources import Resources
from testbed.experiment import Experiment

PROTOCOLS = {"sync": run_sync, "async": run_async, "hierarchical": run_hierarchical}  # by protocol.kind


class Engine:
    """Plays a scenario's rounds, handing each round's rows to `on_round` and, every checkpoint.every_rounds
    rounds and after the last, a Checkpoint to `on_checkpoint`; `start`: a checkpoint to go on from; `resources`:
    the run's device resources, where the caller built them already; `ask`: shown each round's row before it is
    written, a reason to end the run after that round, or None (protocols/stopping.py)."""

    def __init__(self, exp: Experiment, on_round: Callable[[dict, list[dict]], None],
                 on_checkpoint: Callable[[Checkpoint], None] | None = None, start: Checkpoint | None = None,
                 resources: Resources | None = None, ask: Callable[[dict], str | None] | None = None):
        self.exp = exp
        self.start = start
        self.kit = Kit(exp, on_round, on_checkpoint, start, resources, ask)

    def run(self) -> Ending:
        """Play the run; how it ended besides its rows."""
        env = simpy.Environment(initial_time=self.start.now if self.start else 0)
        # what was built before the run (data, fleet, model) lives as long as the run: the collector need not walk
        # it again at every full collection (at 100,000 devices those pauses were ~20% of a round)
        gc.freeze()
        try:
            env.run(until=env.process(PROTOCOLS[self.exp.scenario.protocol.kind](self.kit, env)))
        finally:
            gc.unfreeze()
            self.exp.executor.close()
        return self.kit.stop.ending(tuple(self.exp.contracts.no_task))
