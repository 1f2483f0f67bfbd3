"""The kit every protocol shares: all a protocol may ask of the run, typed, and nothing else.

A protocol (sync.py, asynchronous.py, hierarchical.py) owns the simpy clock and decides who trains when; it plans
each task's clock first and trains only what the server will use. It asks the kit, and the kit's parts, each an
object of its own that is handed only what it uses (no part holds the kit):
- the run: `scenario`, `fleet`, `strategy`, the `selection` and `strategy_rng` streams, the plugins' `contracts`,
  and where it starts (`begin`: fresh, or where a checkpoint left it, with what the protocol kept there);
- `availability` (availability.py): who may take a task at t, and where nobody can, when the first may: the same
  answer for a synchronous round and for an asynchronous free slot;
- `participation` (participation.py): who is picked (`select`, which in a synchronous round may `probe`
  candidates for their loss, protocols/probe.py, built here), the strategy's tasks (`configure`), and the server's
  record of the devices (the history and the selector's state: `dispatched`, `looked`, `ended`, `round_ended`);
- `planner` (planning.py): `plan_round` (the tasks dispatched at one instant, each one's timeline and its plan
  on the clock, through shared links where the scenario has them) and `payload_bytes` (a codec's size);
- a task (here): `aggregate` (the strategy's, checked by its contract), `drain` (its phases drain batteries),
  `deliver` (the model as each downlink delivers it), `train` (the real training of the updates the server uses,
  each from the model it was sent) and the server's own work (`server_work`, on its profile's clock);
- `recorder` (recorder.py): the run folder's rows (`round_row`, `event_row`, `add_spent`), `scores`, `write`,
  `close_round` (a synchronous round's end) and `checkpoint`;
- `stop` (stopping.py): `out_of_time`, `is_last`, `reached_target`, `asked_to_stop` (when to stop),
  `checkpoint_due`, `check_finite` (a diverged model stops the run) and `ran_out_of_devices`; it records how
  the run ended early (`ending`, which the engine returns).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Generator, Protocol

import numpy as np
import simpy
import torch

import devices
from testbed.algorithms.base import Arrival, Failure, Params, ServerState, Strategy, Task
from testbed.checkpoint import Checkpoint
from testbed.clock import Phase, TaskPlan, Timeline, plan_task
from testbed.execution import TrainJob
from testbed.execution.placement import Placement
from testbed.flops import compute_seconds, forward_flops_per_sample
from testbed.network.linklog import LinkLog
from testbed.network.topology import Topology
from testbed.payload import CODECS, transmit
from testbed.protocols.availability import Availability
from testbed.protocols.evaluation import Evaluation
from testbed.protocols.participation import Participation
from testbed.protocols.planning import Planner
from testbed.protocols.probe import PROBE_BYTES, Probe
from testbed.protocols.recorder import Recorder
from testbed.protocols.registry import declared
from testbed.protocols.stopping import StopRules
from testbed.resources import Resources
from testbed.experiment import Experiment, Purpose, stream
from testbed.schema.scenario import Scenario
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


def scaled(updates: list[Params], weights: list[float]) -> list[Params]:
    """Each update times its weight, entry by entry (weight * tensor, the same floats): one torch call for all
    of them, where a product a tensor costs an asynchronous aggregation ~5 us an update and parameter."""
    flat = [u for update in updates for u in update.values()]
    if not flat:
        return updates
    products = iter(torch._foreach_mul(flat, [w for update, w in zip(updates, weights) for _ in update]))
    return [{n: next(products) for n in update} for update in updates]


class Parts(Protocol):
    """What every protocol may ask of the kit; each protocol's own view (sync.SyncKit, asynchronous.AsyncKit,
    hierarchical.HierarchicalKit) adds what it alone uses, so its signature says all it may touch
    (tests/testbed/test_layers.py holds each module to its view)."""

    scenario: Scenario
    planner: Planner
    availability: Availability
    participation: Participation
    recorder: Recorder
    stop: StopRules

    def begin(self) -> Start: ...
    def aggregate(self, state: ServerState, r: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict]: ...
    def drain(self, phases: list[Phase]) -> None: ...
    def deliver(self, state: ServerState, codecs) -> dict: ...
    def train(self, work: list[tuple[Task, Timeline, Params]],
              weights: list[float] | None = None) -> list[Arrival]: ...


class Kit:
    """The shared pieces of one run, handed to its protocol: what a task needs here, and the parts `planner`,
    `availability`, `participation`, `recorder` and `stop` (see the module's docstring), each built here from the
    experiment and given only what it uses. `on_round` receives each round's row and event rows, `on_checkpoint`
    a Checkpoint (where it is given); `start`: a checkpoint to go on from; `resources`: the run's device
    resources, where the caller built them already; `ask`: shown each row before it is written, a reason to stop
    the run after it or None (stopping.py)."""

    def __init__(self, exp: Experiment, on_round: Callable[[dict, list[dict]], None],
                 on_checkpoint: Callable[[Checkpoint], None] | None = None, start: Checkpoint | None = None,
                 resources: Resources | None = None, ask: Callable[[dict], str | None] | None = None):
        scenario = self.scenario = exp.scenario
        self.fleet: devices.Fleet = exp.fleet
        self.strategy: Strategy = exp.strategy
        self.staleness = exp.staleness   # s(tau) of an asynchronous run, None otherwise
        self.contracts = exp.contracts   # the plugins' checks (testbed/contracts.py)
        self.selection = np.random.default_rng(stream(scenario.seed, Purpose.SELECTION))   # who is picked
        self.strategy_rng = np.random.default_rng(stream(scenario.seed, Purpose.STRATEGY))  # the strategy's draws
        self._exp, self._start = exp, start
        self.placement = Placement.of(scenario.executor, exp.strategy)   # where the server's tensors live
        self._params = self.placement.here({n: p.detach().clone() for n, p in exp.model.named_parameters()})
        self._shapes = {n: p.shape for n, p in self._params.items()}
        server = scenario.fleet.profiles[scenario.server.profile]
        self._server_flops_per_s = server.peak_flops * server.efficiency
        self._forward_flops = forward_flops_per_sample(exp.model, exp.dataset.train_x[:1])
        self._num_samples = exp.clients.num_samples
        self._resources = resources or Resources(exp)  # built by the caller where it checks the fleet first
        # what devices keep between rounds, spilled to disk beyond device_state.max_in_memory; left open after
        # the run so the final state stays readable (its spill folder goes when the store is collected)
        self._device_state = ClientStore(scenario.device_state.max_in_memory)
        self._evaluation = Evaluation(exp, self.placement, self.contracts)
        network = scenario.network   # None: every device on links of its own
        self.topology = None if network is None else Topology.build(network, self.fleet.group)
        self.links = LinkLog(self.topology)   # links.csv's rows, as the solves give them
        self.planner = Planner(self.fleet, self.topology, self.links, self._resources, self._shapes,
                               self._forward_flops, _latency(exp))
        self.stop = StopRules(scenario, ask)   # when the run stops, and how it ended early
        self.availability = Availability(self.fleet, self._resources)
        registry = declared(self.fleet, scenario, self._shapes, self._forward_flops, self._num_samples)
        self.participation = Participation(scenario, self.fleet, self.strategy, exp.selector, registry,
                                           self.contracts, self.selection, self.strategy_rng, self._num_samples,
                                           self._resources)
        self.recorder = Recorder(scenario, self._resources, self.topology, self.links, self._evaluation, self.stop,
                                 self.participation, (self.selection, self.strategy_rng), on_round, on_checkpoint)

    # ---- the run ------------------------------------------------------------------------------------------
    def begin(self) -> Start:
        """The server state to start from: fresh, or the checkpoint's, with the streams, the devices' kept state
        and their resources restored."""
        start = self._start
        if start is not None and "selection" in start.protocol:
            self.participation.resume(start.protocol["selection"])
        if start is None:
            state = self.contracts.state(self.strategy.init(self._params), "init")
            return Start(replace(state, clients=self._device_state), 0, False, False, {})
        self._device_state.update(start.state.clients)
        self._resources.restore(start.resources)
        self.links.pending = start.protocol.get("links", [])   # an aggregation's transfers still under way
        self.selection.bit_generator.state = start.selection
        self.strategy_rng.bit_generator.state = start.strategy_rng
        state = self.placement.to_server(replace(start.state, clients=self._device_state))
        return Start(state, start.round, True, start.finished, self.placement.here(start.protocol))

    def aggregate(self, state: ServerState, r: int, arrivals: list[Arrival],
                  failures: list[Failure]) -> tuple[ServerState, dict]:
        """Aggregation r: the strategy's new state and metrics, checked by its contract; every protocol's one way
        to aggregate."""
        return self.contracts.aggregated(self.strategy.aggregate(state, r, arrivals, failures), r)

    # ---- a task -------------------------------------------------------------------------------------------
    def probe(self, state: ServerState, r: int, t0: float) -> Probe:
        """Round r's probe from t0 (protocols/probe.py): the candidates' losses on the current model, each
        download, forward pass over its training samples and upload planned on the clock."""
        def plan(ids: np.ndarray) -> dict[int, tuple[Timeline, TaskPlan]]:
            bytes_down = self.planner.payload_bytes(CODECS[self.scenario.codec.down])
            capacity = self.fleet.train_flops_per_s(r)
            timelines = {d: self.planner.timeline(d, bytes_down, self._forward_flops * int(self._num_samples[d]),
                                          PROBE_BYTES, float(capacity[d]), t0) for d in ids.tolist()}
            if self.topology is not None:   # the probes' transfers share the links too, solved together
                shared, online_until = self.planner.contended(ids, list(timelines.values()), t0)
                timelines = dict(zip(timelines, shared))
            else:
                ends = np.array([t0 + sum(tl.seconds) for tl in timelines.values()])
                online_until = self.fleet.availability.online_until_each(ids, t0, ends)
            planned = {}
            for (d, tl), until in zip(timelines.items(), online_until.tolist()):
                offline_at, _ = self._resources.offline_at(d, t0, tl.seconds, until)
                planned[d] = (tl, plan_task(d, t0, tl.seconds, offline_at))
            return planned

        def loss(d: int) -> float:
            rows = torch.from_numpy(self._exp.clients.train[d])
            data = self._exp.dataset
            return self._evaluation.evaluate(state.params, data.train_x[rows], data.train_y[rows])[1]

        return Probe(t0, plan, loss)

    @property
    def idle_energy(self) -> bool:
        """Whether a device that uploaded before its synchronous round closed pays for its wait (resources)."""
        return self._resources.idle_energy

    def drain(self, phases: list[Phase]) -> None:
        """These phases (a round's, or a task's) drain their devices' batteries, each device's in order."""
        self._resources.drain_all(phases)

    def deliver(self, state: ServerState, codecs) -> dict:
        """The model as each downlink codec delivers it to a device: what the strategy broadcasts (the model;
        FedAdam adds its moments), encoded and decoded."""
        sent = self.strategy.broadcast(state)
        return {codec: transmit(codec, sent, self._shapes) for codec in codecs}

    def train(self, work: list[tuple[Task, Timeline, Params]], weights: list[float] | None = None) -> list[Arrival]:
        """Real training of the tasks whose updates the server uses, each from the model it received, in the
        given order; their arrivals as the server decodes them, each update times its weight where `weights` are
        given (FedBuff's staleness scaling)."""
        exp = self._exp
        jobs = [TrainJob(task, received, exp.clients.train[task.device],
                         (self.scenario.seed, Purpose.TRAINING, task.round, task.device))
                for task, _, received in work]
        results = exp.executor.train(self.strategy, jobs)
        self.contracts.results(results, [task for task, _, _ in work])
        updates = []
        for (task, timeline, _), result in zip(work, results):
            up = result.up or task.up
            if self.planner.payload_bytes(up) != timeline.bytes_up:  # the clock was planned with the task's codec
                raise AssertionError(f"device {task.device}: uploads {self.planner.payload_bytes(up)} bytes, "
                                     f"the round was planned with {timeline.bytes_up}")
            updates.append(transmit(up, result.update, self._shapes))
        if weights is not None:
            updates = scaled(updates, weights)
        return [Arrival(task.device, task.num_samples, update, result.metrics, result.local_state, timeline, task)
                for (task, timeline, _), result, update in zip(work, results, updates)]

    def server_work(self, env: simpy.Environment, r: int, flops: int) -> Generator[simpy.Event, None, list[dict]]:
        """simpy process: the server's own compute after aggregating (a strategy's metrics["server_flops"]:
        FedDU's steps on its data, FedAP's pruning), on the server profile's clock before the next round; returns
        its event rows."""
        if not flops:
            return []
        start = env.now
        yield env.timeout(compute_seconds(flops, self._server_flops_per_s))
        return [{"device": SERVER, "round": r, "phase": "server", "start_s": start, "end_s": env.now,
                 "outcome": "done", "ratio": math.nan}]


def _latency(exp: Experiment):
    """compute: latency's FleetLatency, imported only there (it traces the model on fake tensors); None on the
    FLOP clock."""
    if exp.scenario.compute != "latency":
        return None
    from testbed.latency.clock import FleetLatency

    return FleetLatency(exp)
