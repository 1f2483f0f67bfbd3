"""The round loop on a simulated clock. The only module that imports simpy.

A synchronous round (DESIGN.md): plan the clock first, then train only what the server will use.
1. The strategy picks tasks among the devices online at round start.
2. Each task's timeline plays out in simpy: download (latency + bytes/down_Bps), compute (FLOPs / FLOP/s),
   upload (latency + bytes/up_Bps). A device must stay online over its whole task; if its availability ends
   first it drops at that instant. The round closes at the K-th arrival (over-commit: the rest are surplus),
   at the deadline (the rest are late), or when every task has arrived or dropped.
3. Only the first K arrivals are trained, for real, by the executor. Cut tasks cost simulated time, bytes and
   FLOPs up to their cut, recorded as wasted, but no real compute.
4. The strategy aggregates; the global model is evaluated on the test set on schedule, stamped with the clock.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import simpy
import torch

import devices
from testbed.algorithms.base import Arrival, Failure, RoundContext, Task, Timeline
from testbed.checkpoint import Checkpoint
from testbed.errors import TestbedError
from testbed.execution import TrainJob, evaluate, score
from testbed.flops import compute_seconds, forward_flops_per_sample, training_flops
from testbed.payload import transmit
from testbed.scenario import Experiment, Purpose, stream
from testbed.store import ClientStore

PHASES = ("download", "compute", "upload")
SERVER = -1  # the device column of the server's own work in events.csv (phase "server")


@dataclass(frozen=True)
class Phase:
    device: int
    phase: str
    start_s: float
    end_s: float
    completed: bool


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
        for phase, duration in zip(PHASES, tl.seconds):
            start = env.now
            try:
                if start + duration > offline_at[d]:  # goes offline inside this phase: drops at that instant
                    yield env.timeout(offline_at[d] - start)
                    phases.append(Phase(d, phase, start, env.now, False))
                    dropped.add(d)
                    settle()
                    return
                yield env.timeout(duration)
            except simpy.Interrupt:  # the round closed: this phase ends here
                phases.append(Phase(d, phase, start, env.now, False))
                return
            phases.append(Phase(d, phase, start, env.now, True))
        arrived.append((env.now, d))
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


class Engine:
    """Plays a scenario's rounds, handing each round's rows to `on_round` and, every checkpoint.every_rounds
    rounds and after the last, a Checkpoint to `on_checkpoint`; `start`: a checkpoint to go on from."""

    def __init__(self, exp: Experiment, on_round: Callable[[dict, list[dict]], None],
                 on_checkpoint: Callable[[Checkpoint], None] | None = None, start: Checkpoint | None = None):
        self.exp = exp
        self.cfg = exp.scenario
        self.on_round = on_round
        self.on_checkpoint = on_checkpoint
        self.start = start
        self.params = {n: p.detach().clone() for n, p in exp.model.named_parameters()}
        self.shapes = {n: p.shape for n, p in self.params.items()}
        server = devices.get_profile(self.cfg.server.profile)
        self.server_flops_per_s = server.peak_flops * server.efficiency
        self._payload_sizes: dict = {}
        self.forward_flops = forward_flops_per_sample(exp.model, exp.dataset.train_x[:1])
        self.num_samples = exp.clients.num_samples
        self.test_x, self.test_y = self._test_set()

    def _test_set(self):
        """The held-out test set, or a fixed random subset of it when eval.max_samples asks for one."""
        data, cap = self.exp.dataset, self.cfg.eval.max_samples
        if cap is None or cap >= len(data.test_y):
            return data.test_x, data.test_y
        rng = np.random.default_rng(stream(self.cfg.seed, Purpose.EVALUATION))
        keep = torch.from_numpy(np.sort(rng.choice(len(data.test_y), cap, replace=False)))
        return data.test_x[keep], data.test_y[keep]

    def _evaluate(self, state) -> dict[str, float]:
        """The global model's test accuracy and loss; with local test sets, each device's accuracy on its own
        test data (mean and 10th percentile over devices), with its personal model where the strategy keeps one
        (FedLPS's sparse models) and the global model otherwise."""
        model, params = self.exp.model, state.params
        accuracy, loss = evaluate(model, params, self.test_x, self.test_y)
        scores = {"accuracy": accuracy, "loss": loss}
        clients = self.exp.clients
        if clients.local_test_x is not None:
            correct, _ = score(model, params, clients.local_test_x, clients.local_test_y)
            personal = getattr(self.exp.strategy, "personal_models", None)
            for d, own in (personal(state) if personal else {}).items():
                rows = torch.from_numpy(np.flatnonzero(clients.local_test_owner == d))
                if len(rows):
                    correct[rows.numpy()] = score(model, own, clients.local_test_x[rows], clients.local_test_y[rows])[0]
            sizes = clients.local_test_sizes()
            per_device = np.bincount(clients.local_test_owner, weights=correct, minlength=len(sizes))[sizes > 0]
            per_device = per_device / sizes[sizes > 0]
            scores |= {"local_accuracy": float(per_device.mean()),
                       "local_accuracy_p10": float(np.percentile(per_device, 10))}
        return scores

    def _nbytes(self, codec) -> int:
        """A codec's payload size for this model; computed once where it depends on the shapes alone."""
        if not codec.depends_only_on_shapes:
            return codec.nbytes(self.shapes)
        if codec not in self._payload_sizes:
            self._payload_sizes[codec] = codec.nbytes(self.shapes)
        return self._payload_sizes[codec]

    def timeline(self, task: Task, capacity_flops_per_s: float) -> Timeline:
        fleet, d = self.exp.fleet, task.device
        flops = training_flops(task.forward_flops or self.forward_flops, task.samples_processed)
        bytes_down, bytes_up = self._nbytes(task.down), self._nbytes(task.up)
        latency, down_Bps, up_Bps = float(fleet.latency_s[d]), float(fleet.down_Bps[d]), float(fleet.up_Bps[d])
        seconds = (latency + bytes_down / down_Bps, compute_seconds(flops, capacity_flops_per_s),
                   latency + bytes_up / up_Bps)
        return Timeline(bytes_down, flops, bytes_up, latency, down_Bps, up_Bps, seconds)

    def run(self) -> None:
        env = simpy.Environment(initial_time=self.start.now if self.start else 0)
        # what devices keep between rounds, spilled to disk beyond device_state.max_in_memory; left open after
        # the run so the final state stays readable (its spill folder goes when the store is collected)
        self.device_state = ClientStore(self.cfg.device_state.max_in_memory)
        try:
            env.run(until=env.process(self._rounds(env)))
        finally:
            self.exp.executor.close()

    def _rounds(self, env: simpy.Environment):
        cfg, fleet, strategy = self.cfg, self.exp.fleet, self.exp.strategy
        state, selection, strategy_rng, played = self._initial()
        if self.start and self.start.finished:
            return
        for r in range(played + 1, cfg.stop.max_rounds + 1):
            if cfg.stop.max_sim_time_s is not None and env.now >= cfg.stop.max_sim_time_s:
                break
            online = np.flatnonzero(fleet.availability.online_at(env.now))
            if len(online) == 0:  # nobody to train: wait for the first device to come back
                wake = min(fleet.availability.next_online(d, env.now) for d in range(fleet.n))
                if math.isinf(wake):
                    break
                yield env.timeout(wake - env.now)
                online = np.flatnonzero(fleet.availability.online_at(env.now))
            t_start = env.now
            ctx = RoundContext(r, online, cfg.round.n_select, self.num_samples, fleet, strategy_rng)
            tasks = {t.device: t for t in strategy.configure(state, ctx, selection)}
            capacity = fleet.train_flops_per_s(r)
            timelines = {d: self.timeline(t, float(capacity[d])) for d, t in tasks.items()}
            offline_at = {d: fleet.availability.online_until(d, t_start) for d in tasks}
            play = yield env.process(play_round(env, timelines, offline_at, cfg.round.clients_per_round,
                                                cfg.round.deadline_s))
            state, metrics = strategy.aggregate(state, r, self._train(state, tasks, timelines, play.kept),
                                                [Failure(d, why) for d, why in sorted(play.cut.items())])
            server_flops = int(metrics.pop("server_flops", 0))
            server_rows = yield from self._server_work(env, r, server_flops)
            record = self._record(r, t_start, len(online), tasks, timelines, play, metrics)
            record |= {"t_end_s": env.now, "server_flops": server_flops}  # the round ends after the server's work
            record |= {"tables": metrics["tables"]} if "tables" in metrics else {}  # e.g. pruning.csv, (re)written
            evaluated = r % cfg.eval.every_rounds == 0 or r == cfg.stop.max_rounds
            if evaluated:
                record |= self._evaluate(state)
            self.on_round(record, self._event_rows(r, play, tasks) + server_rows)  # written before any error below
            self._check_finite(r, metrics.get("train_loss", 0.0), record["loss"] if evaluated else 0.0)
            played = r
            target = cfg.stop.target_accuracy
            if cfg.stop.stop_at_target and target is not None and record.get("accuracy", 0.0) >= target:
                break
            if r % cfg.checkpoint.every_rounds == 0 and r < cfg.stop.max_rounds:
                self._checkpoint(r, env, state, selection, strategy_rng, finished=False)
        self._checkpoint(played, env, state, selection, strategy_rng, finished=True)

    def _initial(self):
        """(server state, selection and strategy streams, last round played): fresh, or from the checkpoint."""
        selection = np.random.default_rng(stream(self.cfg.seed, Purpose.SELECTION))
        strategy_rng = np.random.default_rng(stream(self.cfg.seed, Purpose.STRATEGY))
        if self.start is None:
            return replace(self.exp.strategy.init(self.params), clients=self.device_state), selection, strategy_rng, 0
        self.device_state.update(self.start.state.clients)
        selection.bit_generator.state = self.start.selection
        strategy_rng.bit_generator.state = self.start.strategy_rng
        return replace(self.start.state, clients=self.device_state), selection, strategy_rng, self.start.round

    def _checkpoint(self, r: int, env, state, selection, strategy_rng, finished: bool) -> None:
        if self.on_checkpoint is not None:
            self.on_checkpoint(Checkpoint(r, env.now, state, selection.bit_generator.state,
                                          strategy_rng.bit_generator.state, finished))

    @staticmethod
    def _check_finite(r: int, train_loss: float, test_loss: float) -> None:
        """A diverged model stops the run, its rows written by now: a NaN or infinite mean training loss of the
        arrivals (0 in a round nobody reached) or test loss (0 in a round without evaluation)."""
        for what, value in (("training loss", train_loss), ("test loss", test_loss)):
            if not math.isfinite(value):
                raise TestbedError(f"round {r}: the model diverged ({what} {value}); "
                                   "lower client.lr or the server learning rate")

    def _server_work(self, env: simpy.Environment, r: int, flops: int):
        """The server's own compute after aggregating (a strategy's metrics["server_flops"]: FedDU's steps on its
        data, FedAP's pruning), on the server profile's clock before the next round: its event rows."""
        if not flops:
            return []
        start = env.now
        yield env.timeout(compute_seconds(flops, self.server_flops_per_s))
        return [{"device": SERVER, "round": r, "phase": "server", "start_s": start, "end_s": env.now,
                 "outcome": "done", "ratio": math.nan}]

    def _train(self, state, tasks: dict[int, Task], timelines: dict[int, Timeline], kept: list[int]) -> list[Arrival]:
        """Real training of the kept tasks only, each on the model as its codec delivered it."""
        broadcast = getattr(self.exp.strategy, "broadcast", None)
        sent = broadcast(state) if broadcast else state.params
        received = {}
        jobs = []
        for d in sorted(kept):
            codec = tasks[d].down
            if codec not in received:
                received[codec] = transmit(codec, sent, self.shapes)
            jobs.append(TrainJob(tasks[d], received[codec], self.exp.clients.train[d],
                                 stream(self.cfg.seed, Purpose.TRAINING, tasks[d].round, d)))
        results = self.exp.executor.train(self.exp.strategy, jobs)
        arrivals = []
        for job, result in zip(jobs, results):
            d, up = job.task.device, result.up or job.task.up
            if up.nbytes(self.shapes) != timelines[d].bytes_up:  # the clock was planned with the task's codec
                raise AssertionError(f"device {d}: uploads {up.nbytes(self.shapes)} bytes, "
                                     f"the round was planned with {timelines[d].bytes_up}")
            arrivals.append(Arrival(d, job.task.num_samples, transmit(up, result.update, self.shapes), result.metrics,
                                    result.local_state, timelines[d], job.task))
        return arrivals

    def _record(self, r, t_start, n_online, tasks, timelines, play: RoundPlay, metrics) -> dict:
        spent = {"bytes_down": 0, "bytes_up": 0, "flops": 0, "wasted_bytes": 0, "wasted_flops": 0}
        for ph in play.phases:
            nbytes, flops = timelines[ph.device].spent(ph.phase, ph.end_s - ph.start_s, ph.completed)
            spent["bytes_down" if ph.phase == "download" else "bytes_up"] += nbytes
            spent["flops"] += flops
            if ph.device in play.cut:
                spent["wasted_bytes"] += nbytes
                spent["wasted_flops"] += flops
        outcomes = list(play.cut.values())
        return {"round": r, "t_start_s": t_start, "t_end_s": play.t_end, "online": n_online,
                "selected": len(tasks), "arrived": len(play.kept), "dropped": outcomes.count("dropped"),
                "late": outcomes.count("late"), "surplus": outcomes.count("surplus"), **spent,
                "train_loss": metrics.get("train_loss", math.nan), "accuracy": math.nan, "loss": math.nan,
                "local_accuracy": math.nan, "local_accuracy_p10": math.nan}

    @staticmethod
    def _event_rows(r: int, play: RoundPlay, tasks: dict[int, Task]) -> list[dict]:
        return [{"device": p.device, "round": r, "phase": p.phase, "start_s": p.start_s, "end_s": p.end_s,
                 "outcome": play.cut.get(p.device, "done"),
                 "ratio": math.nan if tasks[p.device].ratio is None else tasks[p.device].ratio} for p in play.phases]
