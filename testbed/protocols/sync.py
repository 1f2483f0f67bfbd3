"""Synchronous rounds (FedAvg's protocol): the server picks devices, waits for K updates, aggregates, repeats.

A round on the simulated clock (DESIGN.md): plan the clock first, then train only what the server will use.
1. The strategy picks tasks among the devices online at round start (round.clients_per_round x overcommit).
2. Each task plays out (testbed/protocols/timeline.py): download, compute, upload, or a drop at the instant its
   device goes offline. The round closes at the K-th arrival (over-commit: the rest are surplus), at the
   deadline (the rest are late), or when every task has arrived or dropped.
3. Only the first K arrivals are trained, for real, by the executor. Cut tasks cost simulated time, bytes and
   FLOPs up to their cut, recorded as wasted, but no real compute.
4. The strategy aggregates; the server's own work (if any) runs on the server profile's clock; the global model
   is evaluated on schedule, stamped with the clock.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import simpy

from testbed.algorithms.base import Failure, RoundContext, Timeline
from testbed.protocols.timeline import PHASES, Phase, plan_task, run_task
from testbed.resources import idle_phase


@dataclass(frozen=True)
class RoundPlay:
    """The outcome of one round's clock: who arrived in time, who was cut and why, and every phase."""

    t_end: float
    kept: list[int]                  # first K arrivals, in arrival order
    cut: dict[int, str]              # device -> dropped | late | surplus
    phases: list[Phase]


def play_round(env: simpy.Environment, timelines: dict[int, Timeline], offline_at: dict[int, float],
               keep: int, deadline_s: float | None):
    """simpy process: play every task's timeline from now; returns a RoundPlay."""
    phases: list[Phase] = []
    arrived: list[tuple[float, int]] = []
    dropped: set[int] = set()
    closed = env.event()

    def settle():
        if not closed.triggered and (len(arrived) >= keep or len(arrived) + len(dropped) == len(timelines)):
            closed.succeed()

    def device(d: int, tl: Timeline):
        outcome = yield from run_task(env, plan_task(d, env.now, tl.seconds, offline_at[d]), phases)
        if outcome == "arrived":
            arrived.append((env.now, d))
        elif outcome == "dropped":
            dropped.add(d)
        settle()

    procs = [env.process(device(d, tl)) for d, tl in timelines.items()]
    settle()  # a round without tasks closes at once
    yield env.any_of([closed] + ([env.timeout(deadline_s)] if deadline_s else []))
    arrived.sort()  # ties at one instant go to the lower device id
    kept = [d for _, d in arrived[:keep]]
    cut = {d: "dropped" for d in dropped} | {d: "surplus" for _, d in arrived[keep:]}
    still_running = [p for p in procs if p.is_alive]
    for proc in still_running:
        proc.interrupt()
    yield env.all_of(still_running)
    reason = "surplus" if len(kept) >= keep else "late"
    cut |= {d: reason for d in timelines.keys() - set(kept) - cut.keys()}
    return RoundPlay(env.now, kept, cut, sorted(phases, key=lambda p: (p.device, PHASES.index(p.phase))))


def run_sync(engine, env: simpy.Environment):
    """simpy process: the scenario's synchronous rounds, from the first or from the engine's checkpoint."""
    cfg, fleet, strategy, resources = engine.cfg, engine.exp.fleet, engine.exp.strategy, engine.resources
    state, selection, strategy_rng, played = engine.initial()
    if engine.start and engine.start.finished:
        return
    t_previous = env.now  # the end of the last round: evaluation.every_s counts from it
    for r in range(played + 1, cfg.stop.max_rounds + 1):
        if cfg.stop.max_sim_time_s is not None and env.now >= cfg.stop.max_sim_time_s:
            break
        online, n_online, excluded = yield from usable_devices(engine, env)
        if online is None:  # nobody will be able to train again
            break
        t_start = env.now
        ctx = RoundContext(r, online, cfg.round.n_select, engine.num_samples, fleet, strategy_rng,
                           resources.ratio_cap)
        tasks = {t.device: t for t in strategy.configure(state, ctx, selection)}
        capacity = fleet.train_flops_per_s(r)
        timelines = {d: engine.timeline(t, float(capacity[d]), t_start) for d, t in tasks.items()}
        offline = {d: resources.offline_at(d, t_start, timelines[d].seconds,
                                           fleet.availability.online_until(d, t_start)) for d in tasks}
        play = yield env.process(play_round(env, timelines, {d: at for d, (at, _) in offline.items()},
                                            cfg.round.clients_per_round, cfg.round.deadline_s))
        phases = play.phases + idle_waits(engine, play)
        resources.drain_all(phases)
        received = engine.deliver(state, {tasks[d].down for d in play.kept})
        work = [(tasks[d], timelines[d], received[tasks[d].down]) for d in sorted(play.kept)]
        state, metrics = strategy.aggregate(state, r, engine.train(work),
                                            [Failure(d, why) for d, why in sorted(play.cut.items())])
        server_flops = int(metrics.pop("server_flops", 0))
        server_rows = yield from engine.server_work(env, r, server_flops)
        spent = engine.spent((p, None if p.phase == "idle" else timelines[p.device], p.device in play.cut)
                             for p in phases)
        record = engine.record(r, t_start, env.now, n_online, len(tasks), len(play.kept),
                               list(play.cut.values()), spent, metrics)
        depleted = sum(battery and play.cut.get(d) == "dropped" for d, (_, battery) in offline.items())
        record |= {"server_flops": server_flops} | excluded | engine.resource_columns(r, env.now, depleted)
        record |= {"tables": metrics["tables"]} if "tables" in metrics else {}  # e.g. pruning.csv, (re)written
        evaluated = engine.evaluation_due(r, t_previous, env.now, final=r == cfg.stop.max_rounds)
        t_previous = env.now
        if evaluated:
            record |= engine.evaluate(state)
        events = [engine.event_row(r, p, play.cut.get(p.device, "done"), tasks[p.device]) for p in phases]
        engine.on_round(record, events + server_rows)
        engine.check_finite(r, metrics.get("train_loss", 0.0), record["loss"] if evaluated else 0.0)
        played = r
        target = cfg.stop.target_accuracy
        if cfg.stop.stop_at_target and target is not None and record.get("accuracy", 0.0) >= target:
            break
        if r % cfg.checkpoint.every_rounds == 0 and r < cfg.stop.max_rounds:
            engine.checkpoint(r, env, state, selection, strategy_rng, finished=False)
    engine.checkpoint(played, env, state, selection, strategy_rng, finished=True)


def usable_devices(engine, env: simpy.Environment):
    """simpy process: (ids of the devices that can take a task now: online, and with memory and battery where
    those are modelled; how many are online; how many of those memory and battery exclude), waiting for the first
    to be back where none can; ids None where none ever will."""
    fleet, resources = engine.exp.fleet, engine.resources
    while True:
        online = fleet.availability.online_at(env.now)
        usable = resources.usable(online, env.now)
        if usable.any():
            return np.flatnonzero(usable), int(online.sum()), resources.excluded(online, env.now)
        wake = float(resources.next_usable(env.now, fleet.availability.next_online_all(env.now)).min())
        if math.isinf(wake):
            return None, 0, {}
        yield env.timeout(wake - env.now)


def idle_waits(engine, play: RoundPlay) -> list[Phase]:
    """With idle energy: each kept device's wait, from its upload's end to the round's close."""
    if not engine.resources.idle_energy:
        return []
    ends = {p.device: p.end_s for p in play.phases if p.phase == "upload" and p.completed}
    waits = (idle_phase(d, ends[d], play.t_end) for d in play.kept)
    return [w for w in waits if w is not None]
