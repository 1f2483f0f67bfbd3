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
from dataclasses import dataclass, field, replace

import numpy as np
import simpy

from testbed.algorithms.base import Failure, Task
from testbed.build import staleness_of
from testbed.clock import TaskPlan, Timeline
from testbed.protocols.kit import Kit
from testbed.protocols.planning import Planned
from testbed.selection import Outcome


@dataclass(frozen=True)
class InFlight:
    task: Task
    timeline: Timeline
    plan: TaskPlan
    version: int               # the model version it downloaded
    number: int                # the run's tasks numbered from 1, in order of dispatch (ties: device order)
    battery_cut: bool = False  # its device drops when its battery empties, before its on-interval ends


@dataclass
class Window:
    """What happened since the last aggregation: tasks started, and tasks that ended without being buffered."""

    t_start: float
    selected: int = 0
    ended: list[tuple[InFlight, str]] = field(default_factory=list)   # (task, dropped | stale)


class AsyncServer:
    """One asynchronous run on `env`, through the kit's shared pieces (planning, training, records, checkpoints)."""

    def __init__(self, kit: Kit, env: simpy.Environment):
        self.kit, self.env, self.cfg = kit, env, kit.scenario
        self.protocol = self.cfg.protocol
        self.weight = staleness_of(self.protocol.staleness)
        start = kit.begin()
        self.state, self.version, kept = start.state, start.played, start.kept
        self.resumed, self.finished_before = start.resumed, start.finished   # from a checkpoint; of a finished run
        self.in_flight: dict[int, InFlight] = kept.get("in_flight", {})
        self.busy = np.zeros(kit.fleet.n, dtype=bool)  # the devices in self.in_flight, as a mask
        self.busy[list(self.in_flight)] = True
        self.received: dict[int, dict] = kept.get("received", {})   # version -> {down codec: model as delivered}
        self.window: Window = kept.get("window") or Window(env.now)
        self.dispatches = kept.get("dispatches", 0)   # configure calls so far: the training stream's "round"
        self.started = kept.get("started", 0)         # tasks started so far
        self.next_tick = kept.get("next_tick", 1)     # the next period aggregation is at next_tick * period_s
        self.wake_at: float | None = kept.get("wake_at")
        kit.links.pending = kept.get("links", [])       # shared links' rows not yet written (network/linklog.py)
        self.buffer: list[tuple[InFlight, int]] = kept.get("buffer", [])  # (task, staleness) to aggregate
        self.saved = self.version                     # the version of the last checkpoint
        self.ended: list[tuple[InFlight, str]] = []   # tasks that ended at this instant: arrived | dropped
        self.tick_due = self.limit_due = False
        self.poked = env.event()

    # ---- the server's loop ----------------------------------------------------------------------------
    def serve(self):
        env, p, stop = self.env, self.protocol, self.cfg.stop
        if self.finished_before:
            return
        for task in self.in_flight.values():
            self._end_at_plan([task])
        if p.period_s is not None:
            env.process(self._ticks())
        if stop.max_sim_time_s is not None:
            env.process(self._alarm(stop.max_sim_time_s, "limit_due"))
        if self.wake_at is not None:
            env.process(self._alarm(self.wake_at, None))
        if not self.resumed:
            self._dispatch()
            if not self.in_flight and self.wake_at is None:  # nobody will ever come: settling ends the run
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
        self.ended += [(task, task.plan.outcome) for task in tasks if self.in_flight.get(task.task.device) is task]
        self._poke()

    def _ticks(self):
        while True:
            yield wait_until(self.env, self.next_tick * self.protocol.period_s)
            self.tick_due = True
            self._poke()
            yield self.env.timeout(0)  # the tick is settled at this instant before the next is set

    def _alarm(self, t: float, flag: str | None):
        yield wait_until(self.env, max(t, self.env.now))
        if flag:
            setattr(self, flag, True)
        elif self.wake_at == t:
            self.wake_at = None
        self._poke()

    def _settle(self) -> bool:
        """Everything that happened at this instant, in order; True when the run is over."""
        ended, self.ended = sorted(self.ended, key=lambda e: e[0].task.device), []
        for task, outcome in ended:
            del self.in_flight[task.task.device]
            self.busy[task.task.device] = False
            self.kit.drain(list(task.plan.phases))
            tau = self.version - task.version
            if outcome == "dropped" or (self.protocol.max_staleness is not None and tau > self.protocol.max_staleness):
                self.window.ended.append((task, "dropped" if outcome == "dropped" else "stale"))
                continue
            self.buffer.append((task, tau))
            if self.protocol.buffer_size is not None and len(self.buffer) >= self.protocol.buffer_size:
                if self._aggregate():
                    return True
        if self.tick_due:
            self.tick_due = False
            self.next_tick += 1
            if self._aggregate():
                return True
        if self.limit_due:
            return self._aggregate(final=True)
        self._dispatch()
        if not self.in_flight and self.wake_at is None:  # nothing in flight, and nobody will come online
            self.kit.ran_out_of_devices(self.env.now)
            if self.buffer or self.window.ended or self.window.selected:
                return self._aggregate(final=True)
            self._checkpoint(finished=True)
            return True
        if self.kit.checkpoint_due(self.saved, self.version):  # once the instant is settled: nothing half-done
            self._checkpoint(finished=False)
        return False

    # ---- aggregation ----------------------------------------------------------------------------------
    def _aggregate(self, final: bool = False) -> bool:
        """Aggregate the buffer into version v + 1 and write its row; True when it is the run's last."""
        kit, env = self.kit, self.env
        self.version += 1
        r, now = self.version, env.now
        buffer, self.buffer = self.buffer, []
        arrivals = self._trained(buffer)
        failures = [Failure(t.task.device, why) for t, why in self.window.ended]
        t_previous = self.window.t_start
        self.state, metrics = kit.contracts.aggregated(kit.strategy.aggregate(self.state, r, arrivals, failures), r)
        kit.ended(r, now, [Outcome(t.task.device, t.task.round, "arrived", t.plan.phases[0].start_s, t.plan.end_s,
                                   a.metrics) for (t, _), a in zip(buffer, arrivals)] +
                  [Outcome(t.task.device, t.task.round, why, t.plan.phases[0].start_s, t.plan.end_s)
                   for t, why in self.window.ended])
        final = final or kit.is_last(r) or kit.out_of_time(now)
        scores = kit.scores(self.state, r, t_previous, now, final)
        final = final or kit.reached_target(scores)
        rows = [(t, "done", t.plan.phases, tau) for t, tau in buffer]
        rows += [(t, why, t.plan.phases, None) for t, why in self.window.ended]
        if final:
            rows += self._cut(r, now)
        outcomes = [outcome for _, outcome, _, _ in rows]
        staleness = [tau for _, tau in buffer]
        n_online, excluded = kit.census(now)
        row = kit.round_row(r, t_previous, now, n_online=n_online, excluded=excluded,
                            selected=self.window.selected, arrived=len(buffer), outcomes=outcomes,
                            phases=((p, t.timeline, outcome != "done") for t, outcome, phases, _ in rows
                                    for p in phases),
                            metrics=metrics,
                            depleted=sum(t.battery_cut for t, why in self.window.ended if why == "dropped"))
        row |= {"stale": outcomes.count("stale"), "unfinished": outcomes.count("unfinished"),
                "staleness_mean": float(np.mean(staleness)) if staleness else math.nan,
                "staleness_max": max(staleness) if staleness else math.nan, **scores}
        events = self._events(r, rows)
        if kit.asked_to_stop(row) and not final:   # the on_round callbacks end the run here
            final = True
            self._cut_in_flight(r, now, row, events)
        kit.write(row, events)
        kit.check_finite(r, metrics, scores)
        self.window = Window(now)
        self._forget_versions()
        if final:
            self._checkpoint(finished=True)
        return final

    def _events(self, r: int, rows: list) -> list[dict]:
        """events.csv's rows of aggregation r's tasks: (task, outcome, its phases, staleness or None) each."""
        return [self.kit.event_row(r, p, outcome, t.task, t.timeline) | {"task": t.number, "version": t.version,
                                                                          "staleness": math.nan if tau is None else tau}
                for t, outcome, phases, tau in rows for p in phases]

    def _cut_in_flight(self, r: int, now: float, row: dict, events: list[dict]) -> None:
        """Aggregation r, its row and events built, becomes the run's last (the on_round callbacks asked): the tasks
        in flight are cut at `now` as at the run's end ('unfinished', their work wasted), counted into the row and
        added to the events."""
        cut = self._cut(r, now)
        self.kit.add_spent(row, ((p, t.timeline, True) for t, _, phases, _ in cut for p in phases))
        row["unfinished"] += len(cut)
        events += self._events(r, cut)

    def _cut(self, r: int, now: float) -> list:
        """The tasks in flight cut at `now`, the run's end, as the server saw them: their rows (outcome 'unfinished')."""
        in_flight = sorted(self.in_flight.items())
        self.kit.ended(r, now, [Outcome(d, t.task.round, "cut", t.plan.phases[0].start_s, now) for d, t in in_flight])
        return [(t, "unfinished", t.plan.cut_at(now), None) for _, t in in_flight]

    def _trained(self, buffer: list[tuple[InFlight, int]]) -> list:
        """The buffer's updates trained, as the strategy aggregates them: FedBuff's s(tau) Delta (each update times
        its weight, one product a parameter), or FedAsync's mixture."""
        work = [(t.task, t.timeline, self.received[t.version][t.task.down]) for t, _ in buffer]
        weights = [self.weight(tau) for _, tau in buffer]
        if self.protocol.mixing is None:
            return self.kit.train(work, weights)
        mixed = []
        for arrival, (task, _), s in zip(self.kit.train(work), buffer, weights):
            alpha, start, x = self.protocol.mixing * s, self.received[task.version][task.task.down], self.state.params
            mixed.append(replace(arrival, update={n: alpha * (start[n] + u - x[n]) for n, u in arrival.update.items()}))
        return mixed

    def _forget_versions(self) -> None:
        """Keep only the models that tasks in flight started from (and the newest)."""
        needed = {t.version for t in self.in_flight.values()} | {t.version for t, _ in self.buffer} | {self.version}
        self.received = {v: models for v, models in self.received.items() if v in needed}

    # ---- dispatch -------------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        """Fill the free slots at this instant: one selection, one configure and one plan for all of them."""
        free = self.protocol.concurrency - len(self.in_flight)
        picked = self._pick(free) if free > 0 else np.zeros(0, dtype=np.int64)
        if len(picked):
            kit, now = self.kit, self.env.now
            self.dispatches += 1
            tasks = kit.configure(self.state, self.dispatches, picked, len(picked), picked)
            carried = ({d: Planned(f.task, f.timeline, f.plan, f.battery_cut) for d, f in self.in_flight.items()}
                       if kit.topology is not None else None)  # shared links: the tasks in flight share with these
            planned = kit.plan_round({task.device: task for task in tasks}, self.version + 1, now, carried)
            models = self.received.setdefault(self.version, {})
            ending: dict[float, list[InFlight]] = {}  # by the instant they end
            for d in carried or ():   # planned again: a new end, and the old one's callback finds it replaced
                f, again = self.in_flight[d], planned[d]   # built, not replace()d: a hundred a dispatch
                flight = self.in_flight[d] = InFlight(f.task, again.timeline, again.plan, f.version, f.number,
                                                      f.battery_cut)
                ending.setdefault(flight.plan.end_s, []).append(flight)
            for task in tasks:
                p = planned[task.device]
                if task.down not in models:
                    models |= kit.deliver(self.state, {task.down})
                self.started += 1
                self.in_flight[task.device] = flight = InFlight(task, p.timeline, p.plan, self.version, self.started,
                                                                p.battery_cut and p.plan.outcome == "dropped")
                ending.setdefault(p.plan.end_s, []).append(flight)
            self.busy[picked] = True
            self.window.selected += len(tasks)
            for flights in ending.values():
                self._end_at_plan(flights)
        if len(picked) < free:
            self._wait_for_devices()

    def _pick(self, k: int) -> np.ndarray:
        """Up to k devices the selector picks among those online and idle now, increasing. The candidates are
        listed only where the selector asks (uniform draws by rejection), and their listing is what the server
        sees of availability (history.looked)."""
        kit, now = self.kit, self.env.now
        availability = kit.fleet.availability
        allowed = kit.allowed(now)  # memory and battery; None: every device

        def usable_each(devices: np.ndarray) -> np.ndarray:
            usable = ~self.busy[devices]
            if allowed is not None:
                usable &= allowed[devices]
            return usable & availability.online_each(devices, now)

        def candidates() -> np.ndarray:
            online = kit.online(now)
            kit.looked(online, now)
            return np.flatnonzero(kit.usable(now, online, busy=list(self.in_flight)))

        busy = self.busy

        def usable(d: int) -> bool:
            return not busy[d] and (allowed is None or bool(allowed[d])) and availability.online_one(d, now)

        return kit.select(self.dispatches + 1, now, k, candidates, usable, asynchronous=True,
                          usable_each=usable_each)

    def _wait_for_devices(self) -> None:
        """Free slots and no idle device that can take a task: wake when the first may (online, with battery)."""
        wake = self.kit.next_wake(self.env.now, busy=self.in_flight)
        if math.isfinite(wake) and (self.wake_at is None or wake < self.wake_at):
            self.wake_at = wake
            self.env.process(self._alarm(wake, None))

    def _checkpoint(self, finished: bool) -> None:
        self.saved = self.version
        kept = {"in_flight": self.in_flight, "received": self.received, "window": self.window,
                "buffer": self.buffer, "dispatches": self.dispatches, "started": self.started,
                "next_tick": self.next_tick, "wake_at": self.wake_at, "links": self.kit.links.pending}
        self.kit.checkpoint(self.version, self.env.now, self.state, finished, kept)


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


def run_async(kit: Kit, env: simpy.Environment):
    """simpy process: the scenario's asynchronous run, from the start or from the kit's checkpoint."""
    yield from AsyncServer(kit, env).serve()
