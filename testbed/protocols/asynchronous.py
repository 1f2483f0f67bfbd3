"""Asynchronous and semi-asynchronous FL on the simulated clock: FedAsync, FedBuff, periodic aggregation.

Papers: Xie, Koyejo, Gupta, "Asynchronous Federated Optimization" (FedAsync, 2019); Nguyen et al., "Federated
Learning with Buffered Asynchronous Aggregation" (FedBuff, AISTATS 2022); periodic aggregation as FedScale's
async mode and FLGo's time-triggered server run it.

Clock semantics (protocol.kind: async):
- The server keeps `concurrency` tasks in flight. A slot is filled at the start, and at the instant a task
  arrives, drops or is discarded, by a device the selector (testbed/selection/; uniform by default) picks among
  the devices online and idle at that instant; a device never holds two tasks. Where none is, the slot waits for
  the first idle device to come online.
- A task (testbed/clock.py, as in sync rounds) downloads the current model version v, computes
  (FLOPs / FLOP/s at the capability tier of aggregation v + 1), uploads; its device must stay online over the
  whole task or it drops at the instant it goes offline.
- An arrival's staleness is tau = (the server's version at arrival) - v. With tau > max_staleness it is
  discarded (outcome "stale": its time, bytes and FLOPs are wasted, it is never trained); else it is buffered.
- The server aggregates when the buffer holds buffer_size updates (FedBuff's K; 1: FedAsync), every period_s
  simulated seconds whatever has arrived (an empty buffer leaves the model as it is, as a sync round nobody
  reached), and a last time at stop.max_sim_time_s. Each aggregation makes version v + 1 and one row of
  rounds.csv, which carries the tasks that ended since the previous one.
- Events of one instant: arrivals and drops in device order (each aggregation they trigger at once), then a
  period or time-limit aggregation, then new tasks, which download the newest version.
- Update rule. FedBuff: the update Delta_i trained from version v_i is scaled by s(tau_i) (staleness.py) and
  the strategy aggregates the scaled updates: its sample-weighted mean through its server rule (x + D for
  FedAvg; FedAvgM, FedAdam, FedYogi, FedAdagrad as in sync). FedAsync (mixing alpha, buffer_size 1):
  x <- (1 - alpha_t) x + alpha_t x_new with alpha_t = alpha s(tau) and x_new = x_v + Delta_i, handed to the
  strategy (FedAvg, FedProx: x + D) as D = alpha_t (x_new - x).
- Plan the clock first, train only what the server uses: updates are trained for real when they are
  aggregated, each from the model version it downloaded; the server keeps the versions in flight.
- The run ends at stop.max_rounds aggregations, at the target (stop.stop_at_target), at max_sim_time_s, or
  when nothing is in flight and no device will come online again; tasks still in flight are then cut (outcome
  "unfinished"), their work wasted in the last row.
Deviations: FedBuff averages the buffer uniformly (1/K); the strategies here weight by samples, as FedAvg does.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, Protocol

import numpy as np
import simpy

import devices
from testbed import migrations
from testbed.algorithms.base import Failure, ServerState
from testbed.network.linklog import LinkLog
from testbed.network.topology import Topology
from testbed.protocols.async_rows import Aggregated, TaskRow, aggregation_rows, cut_into, cut_rows
from testbed.protocols.async_state import AsyncState, InFlight, Window, dispatched, task_ended, ticked, waking_at
from testbed.protocols.kit import Parts
from testbed.selection import Outcome

__all__ = ["AsyncServer", "run_async", "wait_until"]


class AsyncKit(Parts, Protocol):
    """What an asynchronous run asks of the kit (kit.py's Parts, and these)."""

    fleet: devices.Fleet
    staleness: Callable[[int], float]
    topology: Topology | None
    links: LinkLog


class AsyncServer:
    """One asynchronous run on `env`, through the kit's shared pieces (planning, training, records, checkpoints):
    its model in `state`, all else it carries in `async_state` (async_state.py), saved whole in checkpoints."""

    def __init__(self, kit: AsyncKit, env: simpy.Environment):
        self.kit, self.env, self.cfg = kit, env, kit.scenario
        self.protocol = self.cfg.protocol
        self.weight = kit.staleness
        start = kit.server.begin()
        self.state: ServerState = start.state
        self.resumed, self.finished_before = start.resumed, start.finished   # from a checkpoint; of a finished run
        async_state = (migrations.async_state(start.protocol, start.played, AsyncState) if start.resumed else
                       AsyncState(Window(env.now)))
        # the models onto the server's device
        self.async_state = replace(async_state, received=kit.server.placement.here(async_state.received))
        if self.resumed and kit.links.flows is not None:   # shared links: the flows in flight (network/inflight.py)
            kit.links.flows.resume(self.async_state.in_flight)
        self.busy = np.zeros(kit.fleet.n, dtype=bool)  # the devices in async_state.in_flight, as a mask
        self.busy[list(self.async_state.in_flight)] = True
        self.saved = self.async_state.version                # the version of the last checkpoint
        self.ended: list[tuple[InFlight, str]] = []   # tasks that ended at this instant: arrived | dropped
        # an instant's alarms, settled within it: never in a checkpoint, which is taken once the instant is settled
        self.tick_due = self.limit_due = False
        self.poked = env.event()

    # ---- the server's loop ----------------------------------------------------------------------------
    def serve(self):
        env, p, stop, async_state = self.env, self.protocol, self.cfg.stop, self.async_state
        if self.finished_before:
            return
        for task in async_state.in_flight.values():
            self._end_at_plan([task])
        if p.period_s is not None:
            env.process(self._ticks())
        if stop.max_sim_time_s is not None:
            env.process(self._alarm(stop.max_sim_time_s, self._limit_reached))
        if async_state.wake_at is not None:
            env.process(self._alarm(async_state.wake_at, self._woken))
        if not self.resumed:
            self._dispatch()
            # nobody will ever come: settling ends the run
            if not async_state.in_flight and async_state.wake_at is None:
                self._poke()
        while True:
            yield self.poked
            self.poked = env.event()
            if self._settle():
                return

    def _poke(self) -> None:
        if not self.poked.triggered:
            self.poked.succeed()

    def _end_at_plan(self, tasks: list[InFlight]) -> None:
        """These tasks, dispatched now, end (arrive or drop) at their plans' common end: one timeout with a
        callback, no process per task."""
        wait_until(self.env, tasks[0].plan.end_s).callbacks.append(lambda _: self._ended(tasks))

    def _ended(self, tasks: list[InFlight]) -> None:
        # a task planned again since (shared links) has a new InFlight, and its own callback
        in_flight = self.async_state.in_flight
        self.ended += [(task, task.plan.outcome) for task in tasks if in_flight.get(task.task.device) is task]
        self._poke()

    def _ticks(self):
        while True:
            yield wait_until(self.env, self.async_state.next_tick * self.protocol.period_s)
            self.tick_due = True
            self._poke()
            yield self.env.timeout(0)  # the tick is settled at this instant before the next is set

    def _alarm(self, t: float, fire):
        """simpy process: at t (now, where t is past), `fire(t)`, then the instant is settled."""
        yield wait_until(self.env, max(t, self.env.now))
        fire(t)
        self._poke()

    def _limit_reached(self, t: float) -> None:
        self.limit_due = True

    def _woken(self, t: float) -> None:
        if self.async_state.wake_at == t:   # an earlier wake set since replaced this one: that one is still awaited
            self.async_state = waking_at(self.async_state, None)

    def _settle(self) -> bool:
        """Everything that happened at this instant, in order; True when the run is over."""
        p = self.protocol
        ended, self.ended = sorted(self.ended, key=lambda e: e[0].task.device), []
        for task, outcome in ended:
            self.busy[task.task.device] = False
            self.kit.work.drain(list(task.plan.phases))
            self.async_state, buffered = task_ended(self.async_state, task, outcome, p.max_staleness)
            if buffered and p.buffer_size is not None and len(self.async_state.buffer) >= p.buffer_size:
                if self._aggregate():
                    return True
        if self.tick_due:
            self.tick_due = False
            self.async_state = ticked(self.async_state)
            if self._aggregate():
                return True
        if self.limit_due:
            return self._aggregate(final=True)
        self._dispatch()
        async_state = self.async_state
        if not async_state.in_flight and async_state.wake_at is None:  # nothing in flight, and nobody will come online
            self.kit.stop.ran_out_of_devices(self.env.now)
            if async_state.buffer or async_state.window.ended or async_state.window.selected:
                return self._aggregate(final=True)
            self._checkpoint(finished=True)
            return True
        # once the instant is settled: nothing half-done
        if self.kit.stop.checkpoint_due(self.saved, async_state.version):
            self._checkpoint(finished=False)
        return False

    # ---- aggregation ----------------------------------------------------------------------------------
    def _aggregate(self, final: bool = False) -> bool:
        """Aggregation v + 1 at this instant (`_step`), then its row written (async_rows.py) and, where it is the
        run's last, the tasks in flight cut and the final checkpoint; True when it is the run's last."""
        kit, now, before = self.kit, self.env.now, self.async_state
        self.state, self.async_state, metrics = self._step(self.state, before, now)
        r = self.async_state.version
        final = final or kit.stop.is_last(r) or kit.stop.out_of_time(now)
        scores = kit.recorder.scores(self.state, r, before.window.t_start, now, final)
        final = final or kit.stop.reached_target(scores)
        done = Aggregated(r, now, before.window, before.buffer, metrics, scores, self._cut(r, now) if final else [])
        row, events = aggregation_rows(kit.recorder, kit.availability, done)
        if kit.stop.asked_to_stop(row) and not final:   # the on_round callbacks end the run here
            final = True
            cut_into(kit.recorder, r, row, events, self._cut(r, now))
        kit.recorder.write(row, events)
        kit.stop.check_finite(r, metrics, scores)
        if final:
            self._checkpoint(finished=True)
        return final

    def _step(self, model: ServerState, async_state: AsyncState, now: float) -> tuple[ServerState, AsyncState, dict]:
        """Aggregation v + 1 at `now`: the buffer's updates trained and aggregated by the strategy, with the tasks
        that ended unbuffered since the last one as its failures, and all of them told to the history (and the
        selector). The new model, the server's state after it (version v + 1, the buffer empty, a new window, only
        the models the tasks in flight started from and the newest kept), and the strategy's metrics."""
        kit, r = self.kit, async_state.version + 1
        arrivals = self._trained(model, async_state)
        failures = [Failure(t.task.device, why) for t, why in async_state.window.ended]
        model, metrics = kit.server.aggregate(model, r, arrivals, failures)
        arrived = [Outcome(t.task.device, t.task.round, "arrived", t.plan.phases[0].start_s, t.plan.end_s, a.metrics)
                   for (t, _), a in zip(async_state.buffer, arrivals)]
        kit.participation.ended(r, now, arrived + [Outcome(t.task.device, t.task.round, why, t.plan.phases[0].start_s,
                                                           t.plan.end_s) for t, why in async_state.window.ended])
        needed = {t.version for t in async_state.in_flight.values()} | {r}
        received = {v: models for v, models in async_state.received.items() if v in needed}
        return model, replace(async_state, version=r, buffer=[], window=Window(now), received=received), metrics

    def _cut(self, r: int, now: float) -> list[TaskRow]:
        """The tasks in flight cut at `now`, the run's end, as the server saw them (into the history): their rows."""
        rows = cut_rows(self.async_state.in_flight, now)
        self.kit.participation.ended(r, now, [Outcome(t.task.device, t.task.round, "cut", t.plan.phases[0].start_s, now)
                                for t, _, _, _ in rows])
        return rows

    def _trained(self, model: ServerState, async_state: AsyncState) -> list:
        """The buffer's updates trained, as the strategy aggregates them into `model`: FedBuff's s(tau) Delta (each
        update times its weight, one product a parameter), or FedAsync's mixture."""
        buffer, received = async_state.buffer, async_state.received
        to_train = [(t.task, t.timeline, received[t.version][t.task.down]) for t, _ in buffer]
        weights = [self.weight(tau) for _, tau in buffer]
        if self.protocol.mixing is None:
            return self.kit.work.train(to_train, weights)
        mixed = []
        for arrival, (task, _), s in zip(self.kit.work.train(to_train), buffer, weights):
            alpha, start, x = self.protocol.mixing * s, received[task.version][task.task.down], model.params
            mixed.append(replace(arrival, update={n: alpha * (start[n] + u - x[n]) for n, u in arrival.update.items()}))
        return mixed

    # ---- dispatch -------------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        """Fill the free slots at this instant: one selection, one configure and one plan for all of them."""
        async_state = self.async_state
        free = self.protocol.concurrency - len(async_state.in_flight)
        picked = self._pick(free) if free > 0 else np.zeros(0, dtype=np.int64)
        if len(picked):
            kit, now, number = self.kit, self.env.now, async_state.dispatches + 1
            tasks = kit.participation.configure(self.state, number, picked, len(picked), picked)
            kit.participation.dispatched(tasks, number)
            # shared links: the tasks in flight share with these (an InFlight reads as a Planned)
            carried = async_state.in_flight if kit.topology is not None else None
            planned = kit.planner.plan_round({task.device: task for task in tasks}, async_state.version + 1, now,
                                             carried)
            models = dict(async_state.received.get(async_state.version, {}))
            # the tasks in flight planned again (shared links): a new end each, and the old end's callback finds
            # its task replaced
            in_flight = async_state.in_flight
            replanned = [InFlight(f.task, p.timeline, p.plan, f.version, f.number, f.battery_cut)
                         for d, p in planned.items() if (f := in_flight.get(d)) is not None]
            flights = []
            for i, task in enumerate(tasks, start=async_state.started + 1):
                p = planned[task.device]
                if task.down not in models:
                    models |= kit.work.deliver(self.state, {task.down})
                flights.append(InFlight(task, p.timeline, p.plan, async_state.version, i,
                                        p.battery_cut and p.plan.outcome == "dropped"))
            self.async_state = dispatched(async_state, flights, replanned, models)
            self.busy[picked] = True
            ending: dict[float, list[InFlight]] = {}  # by the instant they end
            for flight in [*replanned, *flights]:
                ending.setdefault(flight.plan.end_s, []).append(flight)
            for flights_ending in ending.values():
                self._end_at_plan(flights_ending)
        if len(picked) < free:
            self._wait_for_devices()

    def _pick(self, k: int) -> np.ndarray:
        """Up to k devices the selector picks among those online and idle now, increasing. The candidates are
        listed only where the selector asks (uniform draws by rejection), and their listing is what the server
        sees of availability (history.looked)."""
        kit, now = self.kit, self.env.now
        availability = kit.fleet.availability
        who = kit.availability
        allowed = who.allowed(now)  # memory and battery; None: every device

        def usable_each(devices: np.ndarray) -> np.ndarray:
            usable = ~self.busy[devices]
            if allowed is not None:
                usable &= allowed[devices]
            return usable & availability.online_each(devices, now)

        def candidates() -> np.ndarray:
            online = who.online(now)
            kit.participation.looked(online, now)
            return np.flatnonzero(who.usable(now, online, busy=list(self.async_state.in_flight)))

        busy = self.busy

        def usable(d: int) -> bool:
            return not busy[d] and (allowed is None or bool(allowed[d])) and availability.online_one(d, now)

        return kit.participation.select(self.async_state.dispatches + 1, now, k, candidates, usable, asynchronous=True,
                          usable_each=usable_each)

    def _wait_for_devices(self) -> None:
        """Free slots and no idle device that can take a task: wake when the first may (online, with battery)."""
        wake = self.kit.availability.next_wake(self.env.now, busy=self.async_state.in_flight)
        if math.isfinite(wake) and (self.async_state.wake_at is None or wake < self.async_state.wake_at):
            self.async_state = waking_at(self.async_state, wake)
            self.env.process(self._alarm(wake, self._woken))

    def _checkpoint(self, finished: bool) -> None:
        self.saved = self.async_state.version
        self.kit.recorder.checkpoint(self.async_state.version, self.env.now, self.state, finished,
                                     {"server": self.async_state})


def wait_until(env: simpy.Environment, t: float) -> simpy.Timeout:
    """A timeout that fires at t: simpy schedules at now + delay, and a task resumed from a checkpoint must reach
    the very instants the unbroken run reached. Where no now + delay rounds to t (the two sit on grids that
    interleave), it fires one float before t, the same from a checkpoint; a synchronous round instead steps along
    its closing task's phases (sync.RoundPlay.steps), which land on t exactly."""
    d = t - env.now
    while env.now + d < t:
        d = math.nextafter(d, math.inf)
    while env.now + d > t:
        d = math.nextafter(d, -math.inf)
    return env.timeout(d)


def run_async(kit: AsyncKit, env: simpy.Environment):
    """simpy process: the scenario's asynchronous run, from the start or from the kit's checkpoint."""
    yield from AsyncServer(kit, env).serve()
