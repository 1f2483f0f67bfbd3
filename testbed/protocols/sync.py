"""Synchronous rounds (FedAvg's protocol): the server picks devices, waits for K updates, aggregates, repeats.

A round on the simulated clock (DESIGN.md): plan the clock first, then train only what the server will use.
1. The selector (testbed/selection/) picks round.clients_per_round x overcommit devices among those usable at round
   start, and the strategy sets their tasks. A selector may first probe candidates for their loss on the current
   model (SelectionContext.probe, protocols/probe.py: each downloads the model, computes its loss over its
   training samples at its FLOP/s of the round's tier, uploads it; one that goes offline first gives none): the
   tasks are then dispatched when the last probe ends, the round keeping its start as t_start so its span
   includes the probe, and its deadline counting from the dispatch. The probe's bytes and FLOPs count in
   rounds.csv (wasted where it gave no answer), its phases are rows of events.csv with outcome "probe". A probed
   device that is selected downloads the model again with its task (a deviation from pow-d, where the probe's
   copy would be reused: tasks here are configured, and their payloads chosen, after selection).
2. Each task is planned at dispatch (testbed/clock.py): download, compute, upload, or a drop at the
   instant its device goes offline. The round closes at the K-th arrival (over-commit: the rest are surplus), at
   the deadline (the rest are late), or when every task has arrived or dropped: computed from the plans at once,
   and the clock advanced to the close along the closing task's phases, so a round costs no simpy process per
   device.
3. Only the first K arrivals are trained, for real, by the executor. Cut tasks cost simulated time, bytes and
   FLOPs up to their cut, recorded as wasted, but no real compute.
4. The strategy aggregates; the server's own work (if any) runs on the server profile's clock; the global model
   is evaluated on schedule, stamped with the clock.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import simpy

from testbed.algorithms.base import Failure
from testbed.clock import Phase, TaskPlan
from testbed.protocols.kit import Parts
from testbed.protocols.probe import Prober
from testbed.resources import idle_phase


class SyncKit(Parts, Protocol):
    """What a synchronous round asks of the kit (kit.py's Parts, and these)."""

    prober: Prober


@dataclass(frozen=True)
class RoundPlay:
    """The outcome of one round's clock: who arrived in time, who was cut and why, and every phase."""

    t_end: float
    used: list[int]                  # the first K arrivals, whose updates the server uses, in arrival order
    cut: dict[int, str]              # device -> dropped | late | surplus
    phases: list[Phase]
    # the clock's steps from dispatch to t_end, as the event that closed the round took them (its task's phases
    # one by one, or the deadline): t_end is a sum of floats, and a single step from t0 cannot always land on it
    steps: tuple[float, ...] = ()


def play_round(t0: float, plans: dict[int, TaskPlan], clients_per_round: int,
               deadline_s: float | None) -> RoundPlay:
    """The round's clock from its tasks' plans, all dispatched at t0, computed at once: no process per device.

    The round closes at the K-th arrival (K = clients_per_round), at t0 + deadline_s, or when the last task has ended,
    whichever comes first. Everything that ends at the closing instant counts (arrivals there beyond the K-th
    are surplus; ties at one instant go to the lower device id). A task still under way is cut there: its
    phase under way ends at the close, incomplete, and a phase that starts exactly then is kept with no length,
    as the per-device simpy processes this replaces recorded it; and a device that goes offline at the very instant
    the deadline closes the round, as its next phase would start, is cut there (late), not dropped: the deadline
    came first (tests/testbed/test_round_clock.py checks the two against each other)."""
    arrivals = sorted((plan.end_s, d) for d, plan in plans.items() if plan.outcome == "arrived")
    if len(arrivals) >= clients_per_round:
        closing = plans[arrivals[clients_per_round - 1][1]]
    else:
        closing = max(plans.values(), key=lambda plan: plan.end_s, default=None)
    t_end, steps = (t0, ()) if closing is None else (closing.end_s, tuple(p.delay_s for p in closing.phases))
    if deadline_s and t0 + deadline_s <= t_end:
        t_end, steps = t0 + deadline_s, (deadline_s,)
    arrived = [d for end, d in arrivals if end <= t_end]
    used = arrived[:clients_per_round]
    at_deadline = bool(deadline_s) and t_end == t0 + deadline_s
    cut = {d: "dropped" for d, plan in plans.items() if plan.outcome == "dropped" and (
        plan.end_s < t_end or (plan.end_s == t_end and not (at_deadline and plan.phases[-1].delay_s == 0)))}
    cut |= {d: "surplus" for d in arrived[clients_per_round:]}
    reason = "surplus" if len(used) >= clients_per_round else "late"
    cut |= {d: reason for d in plans.keys() - set(used) - cut.keys()}
    phases = []
    for d in sorted(plans):
        plan = plans[d]
        phases += plan.phases if plan.end_s <= t_end else plan.cut_at(t_end, starting=True)
    return RoundPlay(t_end, used, cut, phases, steps)


def run_sync(kit: SyncKit, env: simpy.Environment):
    """simpy process: the scenario's synchronous rounds, from the first or from the kit's checkpoint."""
    cfg = kit.scenario
    start = kit.server.begin()
    if start.finished:
        return
    state, played = start.state, start.played
    picks, record = kit.participation, kit.recorder
    t_previous = env.now  # the end of the last round: evaluation.every_s counts from it
    for r in range(played + 1, cfg.stop.max_rounds + 1):
        if kit.stop.out_of_time(env.now):
            break
        usable, online, excluded = yield from usable_devices(kit, env)
        if usable is None:  # nobody will be able to train again, or not before stop.max_sim_time_s
            break
        t_start = env.now
        picks.looked(online, t_start)
        candidates = np.flatnonzero(usable)
        probe = kit.prober.probe(state, r, t_start)
        selected = picks.select(r, t_start, cfg.round.n_select, lambda: candidates, lambda d: bool(usable[d]),
                                usable_each=lambda devices: usable[devices], probe=probe)
        for step in probe.steps:
            yield env.timeout(step)
        t_dispatch = env.now
        if probe.probed:
            kit.work.drain([p for p, _, _ in probe.phases])
        configured = picks.configure(state, r, candidates, cfg.round.n_select, selected)
        picks.dispatched(configured, r)
        tasks = {t.device: t for t in configured}
        planned = kit.planner.plan_round(tasks, r, t_dispatch)
        play = play_round(t_dispatch, {d: p.plan for d, p in planned.items()}, cfg.clients_per_round,
                          cfg.round.deadline_s)
        for step in play.steps:
            yield env.timeout(step)
        phases = play.phases + idle_waits(kit, play)
        kit.work.drain(phases)
        received = kit.work.deliver(state, {tasks[d].down for d in play.used})
        arrivals = kit.work.train([(tasks[d], planned[d].timeline, received[tasks[d].down]) for d in sorted(play.used)])
        failures = [Failure(d, why) for d, why in sorted(play.cut.items())]
        state, metrics = kit.server.aggregate(state, r, arrivals, failures)
        picks.round_ended(r, env.now, t_dispatch, *outcomes(planned, play), {a.device: a.metrics for a in arrivals})
        server_flops = int(metrics.pop("server_flops", 0))
        server_rows = yield from kit.server.compute(env, r, server_flops)
        depleted = sum(p.battery_cut and play.cut.get(d) == "dropped" for d, p in planned.items())
        row = record.round_row(r, t_start, env.now, n_online=int(online.sum()), excluded=excluded,
                               selected=len(tasks), arrived=len(play.used), outcomes=list(play.cut.values()),
                               phases=probe.phases + [(p, None if p.phase == "idle" else planned[p.device].timeline,
                                                       p.device in play.cut) for p in phases],
                               metrics=metrics, depleted=depleted)
        row["server_flops"] = server_flops
        row |= {"tables": metrics["tables"]} if "tables" in metrics else {}  # e.g. pruning.csv, (re)written
        events = [record.event_row(r, p, "probe", None, tl) for p, tl, _ in probe.phases]
        events += [record.event_row(r, p, play.cut.get(p.device, "done"), tasks[p.device], planned[p.device].timeline)
                   for p in phases]
        played, stop = r, record.close_round(r, state, metrics, row, events + server_rows, t_previous, env.now)
        t_previous = env.now
        if stop:
            break
    record.checkpoint(played, env.now, state, finished=True)


def usable_devices(kit: SyncKit, env: simpy.Environment):
    """simpy process: ((n,) bool, the devices that can take a task now: online, and with memory and battery where
    those are modelled; (n,) bool, those online; how many of those memory and battery exclude), waiting for the
    first to be back where none can; None, None, {} where none ever will (the kit told), or none will before
    stop.max_sim_time_s (the clock then waits until it, and the kit is told when the first will)."""
    limit, who = kit.scenario.stop.max_sim_time_s, kit.availability
    while True:
        online = who.online(env.now)
        usable = who.usable(env.now, online)
        if usable.any():
            return usable, online, who.excluded(online, env.now)
        wake = who.next_wake(env.now)
        if math.isinf(wake):
            kit.stop.ran_out_of_devices(env.now)
            return None, None, {}
        if limit is not None and wake >= limit:  # no round may start after the time limit
            yield env.timeout(limit - env.now)
            kit.stop.ran_out_of_devices(env.now, first_usable_s=wake)
            return None, None, {}
        yield env.timeout(wake - env.now)


def outcomes(planned: dict, play: RoundPlay) -> tuple[list[int], list[str], list[float]]:
    """How each task of a round ended as the server saw it (selection/history.py), in device order: the devices,
    their outcomes (used, surplus: arrived at the close beyond the K-th, cut: under way at the close, or dropped)
    and the instants they ended."""
    devices, seen, ends, cut, t_end = sorted(planned), [], [], play.cut, play.t_end
    for d in devices:
        plan, why = planned[d].plan, cut.get(d)
        if why is None:
            outcome, end = "arrived", plan.end_s
        elif why == "dropped" or (plan.outcome == "arrived" and plan.end_s <= t_end):
            outcome, end = ("dropped" if why == "dropped" else "surplus"), plan.end_s
        else:
            outcome, end = "cut", t_end
        seen.append(outcome)
        ends.append(end)
    return devices, seen, ends


def idle_waits(kit: Parts, play: RoundPlay) -> list[Phase]:
    """With idle energy: each used device's wait, from its upload's end to the round's close."""
    if not kit.work.idle_energy:
        return []
    ends = {p.device: p.end_s for p in play.phases if p.phase == "upload" and p.completed}
    waits = (idle_phase(d, ends[d], play.t_end) for d in play.used)
    return [w for w in waits if w is not None]
