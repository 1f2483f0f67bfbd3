"""Hierarchical aggregation (HierFAVG: Liu, Zhang, Song, Letaief, "Client-Edge-Cloud Hierarchical Federated
Learning", ICC 2020, arXiv:1905.06641): devices report to their cell's edge server, the edges to the cloud.

Every device sits in a cell (network.cells); a cell's edge server reaches the cloud over its kind's backhaul.
One cloud round r is one row of rounds.csv:
1. The cloud sends its model (codec.down) to the edge of every cell that holds devices, over the backhaul's
   downlink: latency_s, then its bytes at the backhaul's down_Bps, sharing the cloud's egress (network.server)
   with the other edges' downloads where one is given (testbed/network/fluid.py: max-min fair).
2. From the instant its model arrived, each edge plays edge_rounds (HierFAVG's kappa_2) rounds one after another,
   independently of the other edges: a synchronous round (sync.py's play_round: round.deadline_s, over-commit)
   among its cell's usable devices (waiting, as sync does, for one to be usable), picked by the scenario's
   selector, whose transfers go to and from the edge: through their cell's shared links, not the backhaul's. The
   used devices (the first K arrivals) train from the edge's model (HierFAVG's kappa_1 local updates:
   client.local_epochs or local_steps) and the edge adds their
   samples-weighted mean update to its model: HierFAVG's edge rule, the samples-weighted mean of their models.
   An edge none of whose devices will ever be usable again stops its rounds there.
3. The edge uploads its update (its model minus the cloud's, codec.up) over the backhaul's uplink, sharing the
   cloud's ingress with the other edges' uploads as in 1.
4. When the last edge's upload has landed, the cloud runs the scenario's server rule (strategy.aggregate: FedAvg,
   FedAdam, ...) on the edges' updates, each weighted by the samples its rounds trained (an edge that trained
   none is left out), and its own work, if any, on the server profile's clock (kit.server.compute). An edge's
   averaging takes no time (no strategy charges FLOPs for a mean).
Edges are played in cell order, their rounds in order, drawing the selection stream in that order, so a seed
gives the same tables. Edge rounds are numbered through the run, g = (r - 1) * edge_rounds + e (e = 1, 2, ...):
g is a task's round (its training stream, the selector's history, its device's tier), so a device picked in two
edge rounds trains on two streams.
Tables: rounds.csv sums the edge rounds' devices (selected, arrived, cut, their bytes and FLOPs: device traffic
only) and adds edge_rounds (played, over all edges) and backhaul_bytes_down / backhaul_bytes_up; events.csv has
the devices' phases as sync writes them, with their edge (-2 - their cell; the server's own work is -1) and
edge_round g, and each edge's transfers as rows of phase backhaul_down / backhaul_up whose device is the edge.
A checkpoint at a cloud round's end holds all there is (edges start each round from the cloud's model): a run
resumes from it as a synchronous one does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import simpy

from testbed.algorithms.base import Arrival, Params, ServerState, Task, weighted_mean
from testbed.algorithms.fedavg import mean_metric
from testbed.clock import Phase
from testbed.network import fluid
from testbed.network.contention import Usage
from testbed.network.linklog import LinkLog
from testbed.network.topology import Topology
from testbed.payload import CODECS, transmit
from testbed.protocols.kit import Parts
from testbed.protocols.planning import Planned
from testbed.protocols.sync import RoundPlay, idle_waits, outcomes, play_round

FIRST_EDGE = -2   # events.csv's device of the edge server of cell c is FIRST_EDGE - c


class HierarchicalKit(Parts, Protocol):
    """What hierarchical aggregation asks of the kit: kit.py's Parts (its edge rounds are synchronous rounds, with
    no probe), the cells' topology and links.csv's log."""

    topology: Topology
    links: LinkLog


def edge_id(cell: int) -> int:
    return FIRST_EDGE - cell


@dataclass
class EdgeClock:
    """An edge's instant, reached by the same additions simpy makes, so the cloud can replay them exactly."""

    t: float
    steps: list[float] = field(default_factory=list)

    def advance(self, dt: float) -> float:
        start, self.t = self.t, self.t + dt
        self.steps.append(dt)
        return start


@dataclass(frozen=True)
class EdgeRound:
    """One edge round: its number g through the run, its tasks and how they played out, and what arrived."""

    g: int
    tasks: dict[int, Task]
    planned: dict[int, Planned]
    play: RoundPlay
    phases: list[Phase]
    arrivals: list[Arrival]


@dataclass(frozen=True)
class EdgePart:
    """One edge's part of a cloud round: its rounds, its backhaul transfers, and the update it sent the cloud
    (None where its rounds trained nothing)."""

    cell: int
    clock: EdgeClock
    rounds: list[EdgeRound]
    backhaul: list[Phase]
    update: Arrival | None


def run_hierarchical(kit: HierarchicalKit, env: simpy.Environment):
    """simpy process: the scenario's cloud rounds, from the first or from the kit's checkpoint."""
    cfg = kit.scenario
    cells = [(c, kit.topology.cell == c) for c in range(len(kit.topology.names))]
    cells = [(c, members) for c, members in cells if members.any()]
    down, up = CODECS[cfg.codec.down], CODECS[cfg.codec.up]
    start = kit.server.begin()
    if start.finished:
        return
    state, played = start.state, start.played
    who, record = kit.availability, kit.recorder
    t_previous = env.now
    for r in range(played + 1, cfg.stop.max_rounds + 1):
        if kit.stop.out_of_time(env.now):
            break
        t_start = env.now
        online = who.online(t_start)
        if not who.usable(t_start, online).any() and math.isinf(who.next_wake(t_start)):
            kit.stop.ran_out_of_devices(t_start)
            break   # nobody will be able to train again
        kit.participation.looked(online, t_start)
        sent = kit.work.deliver(state, {down})[down]
        arrived = backhaul(kit, [c for c, _ in cells], np.full(len(cells), float(t_start)), "down",
                           kit.planner.payload_bytes(down))
        edges = [play_edge(kit, state, sent, c, members, r, t_start, down_s)
                 for (c, members), down_s in zip(cells, arrived)]
        starts = np.array([e.clock.t for e in edges], dtype=np.float64)
        for e, up_s in zip(edges, backhaul(kit, [e.cell for e in edges], starts, "up", kit.planner.payload_bytes(up))):
            e.backhaul.append(Phase(edge_id(e.cell), "backhaul_up", e.clock.advance(up_s), e.clock.t, True, up_s))
        for step in max(edges, key=lambda e: e.clock.t).clock.steps:   # to the last upload's landing
            yield env.timeout(step)
        state, metrics = kit.server.aggregate(state, r, [e.update for e in edges if e.update is not None], [])
        server_flops = int(metrics.pop("server_flops", 0))
        server_rows = yield from kit.server.compute(env, r, server_flops)
        rounds = [er for e in edges for er in e.rounds]
        row = record.round_row(r, t_start, env.now, n_online=int(online.sum()),
                               excluded=who.excluded(online, t_start), selected=sum(len(er.tasks) for er in rounds),
                               arrived=sum(len(er.play.used) for er in rounds),
                               outcomes=[why for er in rounds for why in er.play.cut.values()],
                               phases=[(p, None if p.phase == "idle" else er.planned[p.device].timeline,
                                        p.device in er.play.cut) for er in rounds for p in er.phases],
                               metrics=metrics, depleted=0)
        row |= {"server_flops": server_flops, "edge_rounds": len(rounds),
                "backhaul_bytes_down": len(edges) * kit.planner.payload_bytes(down),
                "backhaul_bytes_up": len(edges) * kit.planner.payload_bytes(up)}
        events = [event for e in edges for event in edge_events(kit, r, e)] + server_rows
        played, stop = r, record.close_round(r, state, metrics, row, events, t_previous, env.now)
        t_previous = env.now
        if stop:
            break
    record.checkpoint(played, env.now, state, finished=True)


def backhaul(kit: HierarchicalKit, cells: list[int], starts: np.ndarray, direction: str, nbytes: int) -> list[float]:
    """Each edge's transfer of `direction` over its cell's backhaul from its start, in seconds: its latency, then
    its bytes at the backhaul's rate, through the cloud's link of that direction (network.server) where the
    scenario gives one, shared by all of them (solved together). A transfer the cloud's link never slowed takes
    latency + bytes / rate exactly."""
    topology = kit.topology
    links = [topology.backhaul[c] for c in cells]
    latency = np.array([b.latency_s for b in links])
    rate = np.array([getattr(b, f"{direction}_Bps") for b in links])
    server = topology.server if np.isfinite(topology.capacity[direction][-1]) else -1
    flows = fluid.solve(starts + latency, np.full(len(cells), float(nbytes)), rate,
                        np.full((len(cells), 1), server), topology.capacity[direction])
    usage = Usage([])
    usage.add(direction, flows)
    kit.links.solved(usage, float(starts.min(initial=math.inf)))
    return [b.latency_s + nbytes / r if waited == 0 else float(end - start)
            for b, r, waited, end, start in zip(links, rate.tolist(), flows.waited_s.tolist(), flows.end_s,
                                                starts)]


def play_edge(kit: HierarchicalKit, state: ServerState, sent: Params, cell: int, members: np.ndarray, r: int,
              t0: float, down_s: float) -> EdgePart:
    """The edge of `cell` (members: (n,) bool, its devices) in cloud round r from t0: the cloud's model `sent`
    down the backhaul (down_s seconds), its edge rounds from the model's arrival, its update (its upload is the
    caller's: the edges' uploads share the cloud's ingress)."""
    scenario, edge = kit.scenario, edge_id(cell)
    up = CODECS[scenario.codec.up]
    clock = EdgeClock(t0)
    phases = [Phase(edge, "backhaul_down", clock.advance(down_s), clock.t, True, down_s)]
    params, others, rounds = sent, np.flatnonzero(~members), []
    kappa = scenario.protocol.edge_rounds
    for g in range((r - 1) * kappa + 1, r * kappa + 1):
        played = edge_round(kit, replace(state, params=params), members, others, g, clock)
        if played is None:
            break
        rounds.append(played)
        if played.arrivals:   # HierFAVG's edge rule: the samples-weighted mean of the used devices' models
            mean = weighted_mean([a.update for a in played.arrivals], [a.num_samples for a in played.arrivals])
            params = {n: params[n] + mean[n] for n in params}
    trained = [a for er in rounds for a in er.arrivals]
    update = None
    if trained:
        delta = {n: params[n] - state.params[n] for n in params}
        shapes = {n: p.shape for n, p in delta.items()}
        update = Arrival(edge, sum(a.num_samples for a in trained), transmit(up, delta, shapes),
                         {"train_loss": mean_metric(trained, "train_loss")})
    return EdgePart(cell, clock, rounds, phases, update)


def edge_round(kit: HierarchicalKit, state: ServerState, members: np.ndarray, others: np.ndarray, g: int,
               clock: EdgeClock) -> EdgeRound | None:
    """Edge round g among `members` (others: the devices outside the cell), from the edge's model in `state`,
    with the clock advanced to its close; None where none of its devices will ever be usable again."""
    who, picks = kit.availability, kit.participation
    while not (usable := who.usable(clock.t, who.online(clock.t)) & members).any():
        wake = who.next_wake(clock.t, others)
        if math.isinf(wake):
            return None
        clock.advance(wake - clock.t)
    cfg, t0 = kit.scenario.round, clock.t
    candidates = np.flatnonzero(usable)
    selected = picks.select(g, t0, cfg.n_select, lambda: candidates, lambda d: bool(usable[d]),
                            usable_each=lambda devices: usable[devices])
    configured = picks.configure(state, g, candidates, cfg.n_select, selected)
    picks.dispatched(configured, g)
    tasks = {t.device: t for t in configured}
    planned = kit.planner.plan_round(tasks, g, t0, server=False)
    play = play_round(t0, {d: p.plan for d, p in planned.items()}, kit.scenario.clients_per_round, cfg.deadline_s)
    for step in play.steps:
        clock.advance(step)
    phases = play.phases + idle_waits(kit, play)
    kit.work.drain(phases)
    received = kit.work.deliver(state, {tasks[d].down for d in play.used})
    arrivals = kit.work.train([(tasks[d], planned[d].timeline, received[tasks[d].down]) for d in sorted(play.used)])
    picks.round_ended(g, clock.t, t0, *outcomes(planned, play), {a.device: a.metrics for a in arrivals})
    return EdgeRound(g, tasks, planned, play, phases, arrivals)


def edge_events(kit: HierarchicalKit, r: int, edge: EdgePart) -> list[dict]:
    """The rows of events.csv of an edge's part of cloud round r: its backhaul download, its devices' phases
    round by round, its backhaul upload."""
    down, up = ({"device": p.device, "round": r, "phase": p.phase, "start_s": p.start_s, "end_s": p.end_s,
                 "outcome": "done", "ratio": math.nan} for p in edge.backhaul)
    edge_of = {"edge": edge_id(edge.cell)}
    devices = [kit.recorder.event_row(r, p, er.play.cut.get(p.device, "done"), er.tasks[p.device],
                                      er.planned[p.device].timeline) | edge_of | {"edge_round": er.g}
               for er in edge.rounds for p in er.phases]
    return [down | edge_of, *devices, up | edge_of]
