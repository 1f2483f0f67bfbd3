"""The kit every protocol shares: all a protocol may ask of the run, typed, and nothing else.

A protocol (sync.py, asynchronous.py, hierarchical.py) owns the simpy clock and decides who trains when; it plans
each task's clock first and trains only what the server will use. It asks the kit's parts, each an object of its
own built here from the experiment and handed only what it uses (no part holds the kit):
- `server` (server.py): where the run starts (`begin`: fresh, or where a checkpoint left it, with what the
  protocol kept there), `aggregate` (the strategy's, checked by its contract), its own work (`compute`, on its
  profile's clock) and where its tensors live (`placement`);
- `availability` (availability.py): who may take a task at t, and where nobody can, when the first may: the same
  answer for a synchronous round and for an asynchronous free slot;
- `participation` (participation.py): who is picked (`select`), the strategy's tasks (`configure`), and the
  server's record of the devices (the history and the selector's state: `dispatched`, `looked`, `ended`,
  `round_ended`);
- `prober` (probe.py): a synchronous round's `probe` of candidates for their loss, which `select` may call;
- `planner` (planning.py): `plan_round` (the tasks dispatched at one instant, each one's timeline and its plan
  on the clock, through shared links where the scenario has them) and `payload_bytes` (a codec's size);
- `work` (task_work.py): what a task does besides its clock: `deliver` (the model as each downlink delivers it),
  `train` (the real training of the updates the server uses, each from the model it was sent), `drain` (its
  phases drain batteries) and `idle_energy`;
- `recorder` (recorder.py): the run folder's rows (`round_row`, `event_row`, `add_spent`), `scores`, `write`,
  `close_round` (a synchronous round's end) and `checkpoint`;
- `stop` (stopping.py): `out_of_time`, `is_last`, `reached_target`, `asked_to_stop` (when to stop),
  `checkpoint_due`, `check_finite` (a diverged model stops the run) and `ran_out_of_devices`; it records how
  the run ended early (`ending`, which the engine returns).
Besides its parts, the kit holds the run-level values a protocol may read: `scenario`, `fleet`, `staleness` (an
asynchronous run's s(tau)), the shared links' `topology` and links.csv's log (`links`).
"""
from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from testbed.checkpoint import Checkpoint
from testbed.execution.placement import Placement
from testbed.flops import forward_flops_per_sample
from testbed.network.linklog import LinkLog
from testbed.network.topology import Topology
from testbed.protocols.availability import Availability
from testbed.protocols.evaluation import Evaluation
from testbed.protocols.participation import Participation
from testbed.protocols.planning import Planner
from testbed.protocols.probe import Prober
from testbed.protocols.recorder import Recorder
from testbed.protocols.registry import declared
from testbed.protocols.server import Restored, Server
from testbed.protocols.stopping import StopRules
from testbed.protocols.task_work import TaskWork
from testbed.resources import Resources
from testbed.experiment import Experiment, Purpose, stream
from testbed.schema.scenario import Scenario
from testbed.store import ClientStore


class Parts(Protocol):
    """What every protocol asks of the kit; each protocol's own view (sync.SyncKit, asynchronous.AsyncKit,
    hierarchical.HierarchicalKit) adds the rest it uses, so its signature says all it touches
    (tests/testbed/test_layers.py holds each module to its view: every name it uses declared, none unused)."""

    scenario: Scenario
    server: Server
    planner: Planner
    availability: Availability
    participation: Participation
    work: TaskWork
    recorder: Recorder
    stop: StopRules


class Kit:
    """The parts of one run, handed to its protocol (see the module's docstring), each built here from the
    experiment. `on_round` receives each round's row and event rows, `on_checkpoint` a Checkpoint (where it is
    given); `start`: a checkpoint to go on from; `resources`: the run's device resources, where the caller built
    them already; `ask`: shown each row before it is written, a reason to stop the run after it or None
    (stopping.py)."""

    def __init__(self, exp: Experiment, on_round: Callable[[dict, list[dict]], None],
                 on_checkpoint: Callable[[Checkpoint], None] | None = None, start: Checkpoint | None = None,
                 resources: Resources | None = None, ask: Callable[[dict], str | None] | None = None):
        scenario = self.scenario = exp.scenario
        self.fleet = exp.fleet
        self.staleness = exp.staleness   # s(tau) of an asynchronous run, None otherwise
        contracts = exp.contracts   # the plugins' checks (testbed/contracts.py)
        selection = np.random.default_rng(stream(scenario.seed, Purpose.SELECTION))   # who is picked
        strategy_rng = np.random.default_rng(stream(scenario.seed, Purpose.STRATEGY))  # the strategy's draws
        placement = Placement.of(scenario.executor, exp.strategy)   # where the server's tensors live
        params = placement.here({n: p.detach().clone() for n, p in exp.model.named_parameters()})
        shapes = {n: p.shape for n, p in params.items()}
        profile = scenario.fleet.profiles[scenario.server.profile]
        forward_flops = forward_flops_per_sample(exp.model, exp.dataset.train_x[:1])
        num_samples = exp.clients.num_samples
        resources = resources or Resources(exp)  # built by the caller where it checks the fleet first
        # what devices keep between rounds, spilled to disk beyond device_state.max_in_memory; left open after
        # the run so the final state stays readable (its spill folder goes when the store is collected)
        device_state = ClientStore(scenario.device_state.max_in_memory)
        evaluation = Evaluation(exp, placement, contracts)
        network = scenario.network   # None: every device on links of its own
        self.topology = None if network is None else Topology.build(network, self.fleet.group)
        self.links = LinkLog(self.topology)   # links.csv's rows, as the solves give them
        self.planner = Planner(self.fleet, self.topology, self.links, resources, shapes, forward_flops,
                               _latency(exp, forward_flops))
        self.stop = StopRules(scenario, ask)   # when the run stops, and how it ended early
        self.availability = Availability(self.fleet, resources)
        registry = declared(self.fleet, scenario, shapes, forward_flops, num_samples)
        self.participation = Participation(scenario, self.fleet, exp.strategy, exp.selector, registry,
                                           contracts, selection, strategy_rng, num_samples, resources)
        self.recorder = Recorder(scenario, resources, self.topology, self.links, evaluation, self.stop,
                                 self.participation, (selection, strategy_rng), on_round, on_checkpoint)
        self.server = Server(exp.strategy, contracts, placement, params, device_state,
                             profile.train_flops_per_s, start,
                             Restored(self.participation, resources, self.links, (selection, strategy_rng)))
        self.work = TaskWork(exp.strategy, contracts, exp.executor, exp.clients.train, scenario.seed, shapes,
                             self.planner, resources)
        self.prober = Prober(self.planner, self.fleet, resources, evaluation, exp.dataset, exp.clients.train,
                             num_samples, forward_flops, scenario.codec.down, self.topology is not None)


def _latency(exp: Experiment, forward_flops: int):
    """compute: latency's FleetLatency, imported only there (it traces the model on fake tensors); None on the
    FLOP clock. `forward_flops`: a sample's through the model, counted once for the kit's parts."""
    if exp.scenario.compute != "latency":
        return None
    from testbed.latency.clock import FleetLatency

    return FleetLatency(exp, forward_flops)
