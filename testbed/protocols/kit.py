"""The kit every protocol shares: all a protocol may ask of the run, typed, and nothing else.

A protocol (sync.py, asynchronous.py, hierarchical.py) owns the simpy clock and decides who trains when; it plans
each task's clock first and trains only what the server will use. For everything else it asks the kit:
- the run: `scenario`, `fleet`, `strategy`, the `selection` and `strategy_rng` streams, and where it starts
  (`begin`: fresh, or where a checkpoint left it, with what the protocol kept there);
- who may take a task at t (`online`, `allowed`, `usable`, `excluded`, `census`) and, where nobody can, when the first may
  (`next_wake`): the same answer for a synchronous round and for an asynchronous free slot;
- who is picked: `select` (the scenario's selector, testbed/selection/, from what the server has observed:
  `history`, which `dispatched`, `looked` and `ended` (`round_ended`) keep up to date, and its `selector_state`,
  which each of its hooks returns and checkpoints keep; in a synchronous round it may `probe` candidates for their
  loss, protocols/probe.py) and `configure` (the strategy sets the picked devices' tasks);
- a task: `plan_round` (planning.py: the tasks dispatched at one instant, each one's timeline and its plan on the
  clock, through shared links where the scenario has them), `drain` (its phases drain batteries), `deliver` (the model as each downlink delivers it),
  `train` (the real training of the updates the server uses, each from the model it was sent) and the server's
  own work (`server_work`, on its profile's clock);
- the run folder: `round_row` (a row of rounds.csv), `event_row` (a row of events.csv), `scores` (evaluation,
  when due), `write` (hand a round's rows on), `close_round` (a synchronous round's end: scored, written,
  checked, checkpointed where due);
- the rules (stopping.py): `out_of_time`, `is_last`, `reached_target`, `asked_to_stop` (when to stop), `checkpoint_due`, and
  `check_finite` (a diverged model stops the run); and `checkpoint`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Generator, Iterable

import numpy as np
import simpy
import torch

import devices
from testbed.algorithms.base import Arrival, Params, RoundContext, ServerState, Strategy, Task
from testbed.build import selector_of
from testbed.checkpoint import Checkpoint
from testbed.contracts import Contracts
from testbed.clock import Phase, TaskPlan, Timeline, plan_task
from testbed.execution import TrainJob
from testbed.execution.placement import Placement
from testbed.flops import compute_seconds, forward_flops_per_sample
from testbed.network.contention import Waits, phase_wait
from testbed.network.linklog import LinkLog
from testbed.network.topology import Topology
from testbed.protocols.registry import declared
from testbed.protocols.evaluation import Evaluation
from testbed.protocols.planning import TaskPlanning
from testbed.protocols.probe import PROBE_BYTES, Probe
from testbed.protocols.stopping import StopRules
from testbed.resources import Resources
from testbed.payload import CODECS, transmit
from testbed.scenario import Experiment, Purpose, Scenario, stream
from testbed.selection import History, Outcome, SelectionContext, Selector, resumed_state
from testbed.store import ClientStore

SERVER = -1  # the device column of the server's own work in events.csv (phase "server")
NO_METRICS: dict = {}   # a task's report where the server trained none: read, never written


@dataclass(frozen=True)
class Start:
    """Where a run begins: fresh, or where a checkpoint left it."""

    state: ServerState
    played: int      # the last round (aggregation) played: 0 when fresh
    resumed: bool    # from a checkpoint
    finished: bool   # the checkpoint is the run's end: nothing is left to play
    kept: dict       # what the protocol kept in the checkpoint (async: tasks in flight, ...); {} when fresh


def scaled(updates: list[Params], weights: list[float]) -> list[Params]:
    """Each update times its weight, entry by entry (weight * tensor, the same floats): one torch call for all
    of them, where a product a tensor costs an asynchronous aggregation ~5 us an update and parameter."""
    flat = [u for update in updates for u in update.values()]
    if not flat:
        return updates
    products = iter(torch._foreach_mul(flat, [w for update, w in zip(updates, weights) for _ in update]))
    return [{n: next(products) for n in update} for update in updates]


class Kit(TaskPlanning, StopRules):
    """The shared pieces of one run, handed to its protocol. `on_round` receives each round's row and event rows,
    `on_checkpoint` a Checkpoint (where it is given); `start`: a checkpoint to go on from; `resources`: the run's
    device resources, where the caller built them already; `ask`: shown each row before it is written, a reason
    to stop the run after it or None (stopping.py)."""

    def __init__(self, exp: Experiment, on_round: Callable[[dict, list[dict]], None],
                 on_checkpoint: Callable[[Checkpoint], None] | None = None, start: Checkpoint | None = None,
                 resources: Resources | None = None, ask: Callable[[dict], str | None] | None = None):
        self.scenario: Scenario = exp.scenario
        self.ask = ask
        self.fleet: devices.Fleet = exp.fleet
        self.strategy: Strategy = exp.strategy
        seed = self.scenario.seed
        self.selection = np.random.default_rng(stream(seed, Purpose.SELECTION))   # who is picked
        self.strategy_rng = np.random.default_rng(stream(seed, Purpose.STRATEGY))  # the strategy's own draws
        self._exp, self._on_round, self._on_checkpoint, self._start = exp, on_round, on_checkpoint, start
        self.placement = Placement.of(self.scenario.executor, exp.strategy)   # where the server's tensors live
        self._params = self.placement.here({n: p.detach().clone() for n, p in exp.model.named_parameters()})
        self._shapes = {n: p.shape for n, p in self._params.items()}
        server = self.scenario.fleet.profiles[self.scenario.server.profile]
        self._server_flops_per_s = server.peak_flops * server.efficiency
        self._payload_sizes: dict = {}
        self._capacity_of: tuple[int | None, np.ndarray | None] = (None, None)
        self._forward_flops = forward_flops_per_sample(exp.model, exp.dataset.train_x[:1])
        self._num_samples = exp.clients.num_samples
        self._resources = resources or Resources(exp)  # built by the caller where it checks the fleet first
        # what devices keep between rounds, spilled to disk beyond device_state.max_in_memory; left open after
        # the run so the final state stays readable (its spill folder goes when the store is collected)
        self._device_state = ClientStore(self.scenario.device_state.max_in_memory)
        self.selector = selector_of(self.scenario.selection)
        self.registry = declared(self.fleet, self.scenario, self._shapes, self._forward_flops, self._num_samples)
        self.history = History.empty(self.fleet.n)
        self.selector_state = self.selector.init(self.registry, self.scenario.selection_rounds,
                                                 self.scenario.updates_per_aggregation)
        self.contracts = Contracts(self.scenario, exp.strategy, self.selector, self._params, self.fleet.n)  # plugins'
        self._evaluation = Evaluation(exp, self.placement, self.contracts)
        self._observes = type(self.selector).observe is not Selector.observe   # see round_ended
        network = self.scenario.network   # None: every device on links of its own
        self.topology = None if network is None else Topology.build(network, self.fleet.group)
        self.links = LinkLog(self.topology)   # links.csv's rows, as the solves give them

    # ---- the run ------------------------------------------------------------------------------------------
    def begin(self) -> Start:
        """The server state to start from: fresh, or the checkpoint's, with the streams, the devices' kept state
        and their resources restored."""
        start = self._start
        if start is not None and "selection" in start.protocol:
            kept = start.protocol["selection"]
            self.history = kept["history"]
            self.selector_state = resumed_state(kept, self.selector_state, self.contracts.selector)
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

    # ---- who may take a task ------------------------------------------------------------------------------
    def online(self, t: float) -> np.ndarray:
        """(n,) bool: the devices online at t."""
        return self.fleet.availability.online_at(t)

    def allowed(self, t: float) -> np.ndarray | None:
        """(n,) bool: fitting a task in memory and with battery enough to start at t; None where neither is
        modelled (every device is), so that a hot path need not build an all-True array."""
        return self._resources.allowed(t)

    def usable(self, t: float, online: np.ndarray, busy: Iterable[int] = ()) -> np.ndarray:
        """(n,) bool: who can take a task at t: online (`online`, the mask at t), allowed, and not busy."""
        usable = self._resources.usable(online, t)
        usable[list(busy)] = False
        return usable

    def excluded(self, online: np.ndarray, t: float) -> dict[str, int]:
        """How many online devices memory and battery keep out at t: rounds.csv's excluded_* columns."""
        return self._resources.excluded(online, t)

    def census(self, t: float) -> tuple[int, dict[str, int]]:
        """How many devices are online at t, and how many of them memory and battery keep out (`excluded`):
        without either, a count that needs no fleet-wide mask."""
        if not self._resources.restricts:
            return self.fleet.availability.count_online(t), {}
        online = self.online(t)
        return int(online.sum()), self.excluded(online, t)

    def next_wake(self, t: float, busy: Iterable[int] = ()) -> float:
        """Where nobody not busy is usable at t, a lower bound on when the first may be (online, with battery
        enough): waking there and asking again makes progress; inf where none ever will."""
        idle = np.ones(self.fleet.n, dtype=bool)
        idle[list(busy)] = False
        wake = self._resources.next_usable(t, self.fleet.availability.next_online_all(t))
        return float(wake[idle].min(initial=math.inf))

    # ---- who is picked -----------------------------------------------------------------------------------
    def select(self, r: int, now: float, n_select: int, candidates: Callable[[], np.ndarray],
               usable: Callable[[int], bool], *, asynchronous: bool = False, probe=None,
               usable_each: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
        """The selector's pick for round (dispatch) r at `now`: up to n_select distinct ids among the candidates
        (listed by `candidates()` where the selector asks; `usable(d)`: one device's answer, `usable_each(ids)`:
        several at once), increasing."""
        deadline = None if asynchronous else self.scenario.round.deadline_s
        ctx = SelectionContext(r, now, n_select, self.registry, self.history, candidates, usable,
                               deadline_s=deadline, asynchronous=asynchronous, probe=probe, usable_each=usable_each)
        answer = self.selector.select(self.selector_state, ctx, self.selection)
        picked, self.selector_state = self.contracts.selected(answer, self.selector_state, ctx)
        return picked

    def probe(self, state: ServerState, r: int, t0: float) -> Probe:
        """Round r's probe from t0 (protocols/probe.py): the candidates' losses on the current model, each
        download, forward pass over its training samples and upload planned on the clock."""
        def plan(ids: np.ndarray) -> dict[int, tuple[Timeline, TaskPlan]]:
            bytes_down = self._nbytes(CODECS[self.scenario.codec.down])
            capacity = self.fleet.train_flops_per_s(r)
            timelines = {d: self.timeline(d, bytes_down, self._forward_flops * int(self._num_samples[d]),
                                          PROBE_BYTES, float(capacity[d]), t0) for d in ids.tolist()}
            if self.topology is not None:   # the probes' transfers share the links too, solved together
                shared, online_until = self.contended(ids, list(timelines.values()), t0)
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

    def looked(self, online: np.ndarray, now: float) -> None:
        """The server listed who is online at `now`: the history's availability record."""
        self.history.looked(online, now)

    def ended(self, r: int, now: float, outcomes: list[Outcome]) -> None:
        """Tasks that ended, as the server saw them, in round (aggregation) r: into the history, then the
        selector is told."""
        self.history.record(outcomes)
        self._observe(r, now, outcomes)

    def round_ended(self, r: int, now: float, t0: float, devices: list[int], outcomes: list[str],
                    ended_s: list[float], metrics: dict[int, dict]) -> None:
        """`ended` for synchronous round r's tasks, all dispatched at t0, given column by column (each device, its
        outcome and end, in device order; `metrics`: the trained ones' reports): the Outcome records are made only
        for a selector whose observe reads them (the base one does not: a thousand a round were ~8% of the
        engine's round at 100,000 devices, benchmarks/scale.py)."""
        n = len(devices)
        self.history.record_columns(devices, [r] * n, outcomes, [t0] * n, ended_s,
                                    [metrics.get(d, NO_METRICS) for d in devices])
        if self._observes:
            self._observe(r, now, [Outcome(d, r, outcome, t0, end, metrics.get(d, {}))
                                   for d, outcome, end in zip(devices, outcomes, ended_s)])

    def _observe(self, r: int, now: float, outcomes: list[Outcome]) -> None:
        told = self.selector.observe(self.selector_state, r, now, outcomes, self.history)
        self.selector_state = self.contracts.observed(told, self.selector_state, r)   # the state it returns

    # ---- a task -------------------------------------------------------------------------------------------
    def configure(self, state: ServerState, r: int, candidates: np.ndarray, n_select: int,
                  selected: np.ndarray) -> list[Task]:
        """The strategy's tasks for round (dispatch) r, one for each selected device; the candidates and how many
        were to be picked are the strategy's to read."""
        ctx = RoundContext(r, candidates, n_select, self._num_samples, self.fleet, self.strategy_rng,
                           self._resources.ratio_cap, selected)
        tasks = self.contracts.tasks(self.strategy.configure(state, ctx, self.selection), ctx)
        self.history.dispatched(np.fromiter((t.device for t in tasks), np.int64, len(tasks)), r)
        return tasks

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
            if self._nbytes(up) != timeline.bytes_up:  # the clock was planned with the task's codec
                raise AssertionError(f"device {task.device}: uploads {self._nbytes(up)} bytes, "
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

    # ---- the run folder -----------------------------------------------------------------------------------
    def round_row(self, r: int, t_start: float, t_end: float, *, n_online: int, excluded: dict[str, int],
                  selected: int, arrived: int, outcomes: list[str],
                  phases: Iterable[tuple[Phase, Timeline | None, bool]], metrics: dict, depleted: int) -> dict:
        """The row of rounds.csv of round (aggregation) r, before evaluation: its span, how many devices were
        online (and kept out by memory and battery), selected, arrived and cut for each reason (`outcomes`, one
        per cut task), what its `phases` spent (each with its task's timeline, None for an idle wait, and whether
        its work is wasted), the strategy's training loss, and what batteries add (`depleted`: tasks dropped by
        an empty battery)."""
        row = {"round": r, "t_start_s": t_start, "t_end_s": t_end, "online": n_online, "selected": selected,
               "arrived": arrived, "dropped": outcomes.count("dropped"), "late": outcomes.count("late"),
               "surplus": outcomes.count("surplus"), **self._spent(phases), "server_flops": 0,
               "train_loss": metrics.get("train_loss", math.nan), "accuracy": math.nan, "loss": math.nan,
               "local_accuracy": math.nan, "local_accuracy_p10": math.nan}
        row |= excluded
        if self.topology is not None:
            # a round's transfers end with it; an aggregation's go on, and their rest goes into the next one
            row["links"] = self.links.until(t_end, r, keep_rest=self.scenario.protocol.kind == "async")
        if self._resources.batteries is not None:
            row |= {"depleted": depleted, "battery": self._resources.battery_rows(r, t_end)}
        return row

    def add_spent(self, row: dict, phases: Iterable[tuple[Phase, Timeline | None, bool]]) -> None:
        """Count more phases into a row round_row built (tasks cut after it was built): sums, and the longest wait."""
        for column, value in self._spent(phases).items():
            row[column] = max(row[column], value) if column == "network_wait_max_s" else row[column] + value

    def _spent(self, phases: Iterable[tuple[Phase, Timeline | None, bool]]) -> dict[str, int]:
        """Bytes and FLOPs of these phases, spent and wasted; and their joules where energy is accounted."""
        spent = {"bytes_down": 0, "bytes_up": 0, "flops": 0, "wasted_bytes": 0, "wasted_flops": 0}
        joules, wasted_joules = [], []
        energy = self._resources.energy is not None
        waits = Waits() if self.topology is not None else None
        for ph, timeline, wasted in phases:
            if energy:
                joules.append(self._resources.joules(ph))
                wasted_joules += joules[-1:] if wasted else []
            if timeline is None:
                continue
            nbytes, flops = timeline.spent(ph.phase, ph.end_s - ph.start_s, ph.completed)
            spent["bytes_down" if ph.phase == "download" else "bytes_up"] += nbytes
            spent["flops"] += flops
            if wasted:
                spent["wasted_bytes"] += nbytes
                spent["wasted_flops"] += flops
            if waits is not None:
                waits.add(ph, timeline, nbytes)
        spent |= {} if waits is None else waits.columns()
        if not energy:
            return spent
        return spent | {"energy_J": math.fsum(joules), "wasted_energy_J": math.fsum(wasted_joules)}

    def event_row(self, r: int, p: Phase, outcome: str, task: Task | None, timeline: Timeline | None = None) -> dict:
        """The row of events.csv of phase p of a task of round (aggregation) r, which ended as `outcome`; a
        probe's phase has no task (its ratio NaN). With shared links, its task's timeline gives its wait."""
        ratio = math.nan if task is None or task.ratio is None else task.ratio
        row = {"device": p.device, "round": r, "phase": p.phase, "start_s": p.start_s, "end_s": p.end_s,
               "outcome": outcome, "ratio": ratio}
        if self._resources.energy is not None:   # in place: 3,000 rows a round at 100,000 devices
            row["energy_J"] = self._resources.joules(p)
        if self.topology is not None:
            row["waited_s"] = phase_wait(p, timeline)
        return row

    def scores(self, state: ServerState, r: int, t_previous: float, t: float, final: bool) -> dict[str, float]:
        """The model's scores where round r, ending at t after the previous one ended at t_previous, is evaluated
        (protocols/evaluation.py; `final`: the run's last round is); {} where it is not."""
        return self._evaluation.scores(state) if self._evaluation.due(r, t_previous, t, final) else {}

    def write(self, row: dict, events: list[dict]) -> None:
        """Hand round r's row and event rows to the run folder."""
        self._on_round(row, events)

    def close_round(self, r: int, state: ServerState, metrics: dict, row: dict, events: list[dict],
                    t_previous: float, now: float) -> bool:
        """The end of synchronous round r at `now` (the previous one ended at t_previous): the model scored where
        due, the row shown to the on_round callbacks and written, the model checked, a checkpoint where due; True
        where the run stops here (the target reached, or the callbacks asked)."""
        scores = self.scores(state, r, t_previous, now, final=self.is_last(r))
        row |= scores
        asked = self.asked_to_stop(row)
        self.write(row, events)
        self.check_finite(r, metrics, scores)
        if asked or self.reached_target(scores):
            return True
        if not self.is_last(r) and self.checkpoint_due(r - 1, r):
            self.checkpoint(r, now, state, finished=False)
        return False

    # ---- checkpoints (when to stop, when a checkpoint is due: stopping.py) -----------------------------------
    def checkpoint(self, r: int, now: float, state: ServerState, finished: bool, kept: dict | None = None) -> None:
        """Hand the end of round (aggregation) r, at simulated time `now`, to on_checkpoint, with the streams and
        the resources' state; `kept`: what the protocol carries on of its own."""
        if self._on_checkpoint is not None:
            selector = self.contracts.checkpointable(self.selector_state)
            kept = (kept or {}) | {"selection": {"history": self.history, "state": selector},
                                   "links": self.links.pending}
            self._on_checkpoint(Checkpoint(r, now, state, self.selection.bit_generator.state,
                                           self.strategy_rng.bit_generator.state, finished, protocol=kept,
                                           resources=self._resources.state()))
