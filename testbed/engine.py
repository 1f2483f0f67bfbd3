"""The engine: what every protocol of a run shares. The protocols (testbed/protocols/) own the clock.

A protocol plans each task's clock first and trains only what the server will use; the engine gives it the
pieces: a task's timeline (bytes over the links, FLOPs over the device's FLOP/s), the real training of the
updates the server aggregates (through the executor, each from the model it was sent), the server's own work on
its profile's clock, evaluation on schedule, the round records and event rows of the run folder, checkpoints,
and the divergence check.
"""
from __future__ import annotations

import gc
import math
from dataclasses import replace
from typing import Callable, Iterable

import numpy as np
import simpy
import torch

import devices
from testbed.algorithms.base import Arrival, Params, Task, Timeline
from testbed.checkpoint import Checkpoint
from testbed.errors import TestbedError
from testbed.execution import TrainJob, evaluate, score
from testbed.flops import compute_seconds, forward_flops_per_sample, training_flops
from testbed.payload import transmit
from testbed.protocols import PROTOCOLS
from testbed.protocols.timeline import Phase
from testbed.resources import Resources
from testbed.resources.timing import varying_timeline
from testbed.scenario import Experiment, Purpose, stream
from testbed.store import ClientStore

SERVER = -1  # the device column of the server's own work in events.csv (phase "server")


class Engine:
    """Plays a scenario's rounds, handing each round's rows to `on_round` and, every checkpoint.every_rounds
    rounds and after the last, a Checkpoint to `on_checkpoint`; `start`: a checkpoint to go on from; `resources`:
    the run's device resources, where the caller built them already."""

    def __init__(self, exp: Experiment, on_round: Callable[[dict, list[dict]], None],
                 on_checkpoint: Callable[[Checkpoint], None] | None = None, start: Checkpoint | None = None,
                 resources: Resources | None = None):
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
        self.resources = resources or Resources(exp)  # built by the caller where it checks the fleet first

    def _test_set(self):
        """The held-out test set, or a fixed random subset of it when eval.max_samples asks for one."""
        data, cap = self.exp.dataset, self.cfg.eval.max_samples
        if cap is None or cap >= len(data.test_y):
            return data.test_x, data.test_y
        rng = np.random.default_rng(stream(self.cfg.seed, Purpose.EVALUATION))
        keep = torch.from_numpy(np.sort(rng.choice(len(data.test_y), cap, replace=False)))
        return data.test_x[keep], data.test_y[keep]

    def evaluate(self, state) -> dict[str, float]:
        """The global model's test accuracy and loss; with local test sets, each device's accuracy on its own
        test data (mean and 10th percentile over devices), with its personal model where the strategy keeps one
        (FedLPS's sparse models) and the global model otherwise."""
        model, params = self.exp.model, state.params
        accuracy, loss = evaluate(model, params, self.test_x, self.test_y)
        scores = {"accuracy": accuracy, "loss": loss}
        clients = self.exp.clients
        if clients.local_test_x is not None:
            correct, _ = score(model, params, clients.local_test_x, clients.local_test_y)
            for d, own in self.exp.strategy.personal_models(state).items():
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

    def timeline(self, task: Task, capacity_flops_per_s: float, t0: float) -> Timeline:
        """The task's bytes, FLOPs and phase durations, dispatched at t0 (which matters where rates fluctuate)."""
        fleet, d = self.exp.fleet, task.device
        flops = training_flops(task.forward_flops or self.forward_flops, task.samples_processed)
        bytes_down, bytes_up = self._nbytes(task.down), self._nbytes(task.up)
        latency, down_Bps, up_Bps = float(fleet.latency_s[d]), float(fleet.down_Bps[d]), float(fleet.up_Bps[d])
        if self.resources.varying:
            compute_seconds(flops, capacity_flops_per_s)  # its checks
            return varying_timeline(d, t0, bytes_down, flops, bytes_up, latency, down_Bps, up_Bps,
                                    capacity_flops_per_s, fleet.speed, fleet.bandwidth)
        seconds = (latency + bytes_down / down_Bps, compute_seconds(flops, capacity_flops_per_s),
                   latency + bytes_up / up_Bps)
        return Timeline(bytes_down, flops, bytes_up, latency, down_Bps, up_Bps, seconds)

    def run(self) -> None:
        env = simpy.Environment(initial_time=self.start.now if self.start else 0)
        # what devices keep between rounds, spilled to disk beyond device_state.max_in_memory; left open after
        # the run so the final state stays readable (its spill folder goes when the store is collected)
        self.device_state = ClientStore(self.cfg.device_state.max_in_memory)
        # what was built before the run (data, fleet, model) lives as long as the run: the collector need not walk
        # it again at every full collection (at 100,000 devices those pauses were ~20% of a round)
        gc.freeze()
        try:
            env.run(until=env.process(PROTOCOLS[self.cfg.protocol.kind](self, env)))
        finally:
            gc.unfreeze()
            self.exp.executor.close()

    def initial(self):
        """(server state, selection and strategy streams, last round played): fresh, or from the checkpoint."""
        selection = np.random.default_rng(stream(self.cfg.seed, Purpose.SELECTION))
        strategy_rng = np.random.default_rng(stream(self.cfg.seed, Purpose.STRATEGY))
        if self.start is None:
            return replace(self.exp.strategy.init(self.params), clients=self.device_state), selection, strategy_rng, 0
        self.device_state.update(self.start.state.clients)
        self.resources.restore(self.start.resources)
        selection.bit_generator.state = self.start.selection
        strategy_rng.bit_generator.state = self.start.strategy_rng
        return replace(self.start.state, clients=self.device_state), selection, strategy_rng, self.start.round

    def checkpoint(self, r: int, env, state, selection, strategy_rng, finished: bool, protocol: dict | None = None):
        """Hand the end of round (aggregation) r to on_checkpoint; `protocol`: what a protocol adds of its own."""
        if self.on_checkpoint is not None:
            self.on_checkpoint(Checkpoint(r, env.now, state, selection.bit_generator.state,
                                          strategy_rng.bit_generator.state, finished, protocol=protocol or {},
                                          resources=self.resources.state()))

    @staticmethod
    def check_finite(r: int, train_loss: float, test_loss: float) -> None:
        """A diverged model stops the run, its rows written by now: a NaN or infinite mean training loss of the
        arrivals (0 in a round nobody reached) or test loss (0 in a round without evaluation)."""
        for what, value in (("training loss", train_loss), ("test loss", test_loss)):
            if not math.isfinite(value):
                raise TestbedError(f"round {r}: the model diverged ({what} {value}); "
                                   "lower client.lr or the server learning rate")

    def server_work(self, env: simpy.Environment, r: int, flops: int):
        """The server's own compute after aggregating (a strategy's metrics["server_flops"]: FedDU's steps on its
        data, FedAP's pruning), on the server profile's clock before the next round: its event rows."""
        if not flops:
            return []
        start = env.now
        yield env.timeout(compute_seconds(flops, self.server_flops_per_s))
        return [{"device": SERVER, "round": r, "phase": "server", "start_s": start, "end_s": env.now,
                 "outcome": "done", "ratio": math.nan}]

    def evaluation_due(self, r: int, t_previous: float, t: float, final: bool) -> bool:
        """Whether round (aggregation) r, ending at t after the previous one ended at t_previous, is evaluated:
        every eval.every_rounds rounds, or with eval.every_s the first to end at or after each multiple of it;
        and the last."""
        every_s = self.cfg.eval.every_s
        if every_s is not None:
            return final or math.floor(t / every_s) > math.floor(t_previous / every_s)
        return final or r % self.cfg.eval.every_rounds == 0

    def deliver(self, state, codecs) -> dict:
        """The model as each downlink codec delivers it to a device: what the strategy broadcasts (the model;
        FedAdam adds its moments), encoded and decoded."""
        sent = self.exp.strategy.broadcast(state)
        return {codec: transmit(codec, sent, self.shapes) for codec in codecs}

    def train(self, work: list[tuple[Task, Timeline, Params]]) -> list[Arrival]:
        """Real training of the tasks whose updates the server uses, each from the model it received, in the
        given order; their arrivals as the server decodes them."""
        jobs = [TrainJob(task, received, self.exp.clients.train[task.device],
                         (self.cfg.seed, Purpose.TRAINING, task.round, task.device))
                for task, _, received in work]
        results = self.exp.executor.train(self.exp.strategy, jobs)
        arrivals = []
        for (task, timeline, _), result in zip(work, results):
            d, up = task.device, result.up or task.up
            if self._nbytes(up) != timeline.bytes_up:  # the clock was planned with the task's codec
                raise AssertionError(f"device {d}: uploads {self._nbytes(up)} bytes, "
                                     f"the round was planned with {timeline.bytes_up}")
            arrivals.append(Arrival(d, task.num_samples, transmit(up, result.update, self.shapes), result.metrics,
                                    result.local_state, timeline, task))
        return arrivals

    def spent(self, phases: Iterable[tuple[Phase, Timeline | None, bool]]) -> dict[str, int]:
        """Bytes and FLOPs of these phases (each with its task's timeline, None for an idle wait, and whether its
        work is wasted); and their joules where energy is accounted."""
        spent = {"bytes_down": 0, "bytes_up": 0, "flops": 0, "wasted_bytes": 0, "wasted_flops": 0}
        joules, wasted_joules = [], []
        for ph, timeline, wasted in phases:
            if self.resources.energy is not None:
                joules.append(self.resources.joules(ph))
                wasted_joules += joules[-1:] if wasted else []
            if timeline is None:
                continue
            nbytes, flops = timeline.spent(ph.phase, ph.end_s - ph.start_s, ph.completed)
            spent["bytes_down" if ph.phase == "download" else "bytes_up"] += nbytes
            spent["flops"] += flops
            if wasted:
                spent["wasted_bytes"] += nbytes
                spent["wasted_flops"] += flops
        if self.resources.energy is None:
            return spent
        return spent | {"energy_J": math.fsum(joules), "wasted_energy_J": math.fsum(wasted_joules)}

    @staticmethod
    def record(r: int, t_start: float, t_end: float, n_online: int, n_selected: int, n_arrived: int,
               outcomes: list[str], spent: dict[str, int], metrics: dict) -> dict:
        """The round's (aggregation's) row of rounds.csv, before evaluation."""
        return {"round": r, "t_start_s": t_start, "t_end_s": t_end, "online": n_online, "selected": n_selected,
                "arrived": n_arrived, "dropped": outcomes.count("dropped"), "late": outcomes.count("late"),
                "surplus": outcomes.count("surplus"), **spent, "server_flops": 0,
                "train_loss": metrics.get("train_loss", math.nan), "accuracy": math.nan, "loss": math.nan,
                "local_accuracy": math.nan, "local_accuracy_p10": math.nan}

    def resource_columns(self, r: int, t_end: float, depleted: int) -> dict:
        """What batteries add to a round's row: tasks dropped by an empty battery, and battery.csv's rows."""
        if self.resources.batteries is None:
            return {}
        return {"depleted": depleted, "battery": self.resources.battery_rows(r, t_end)}

    def event_row(self, r: int, p: Phase, outcome: str, task: Task) -> dict:
        row = {"device": p.device, "round": r, "phase": p.phase, "start_s": p.start_s, "end_s": p.end_s,
               "outcome": outcome, "ratio": math.nan if task.ratio is None else task.ratio}
        return row if self.resources.energy is None else row | {"energy_J": self.resources.joules(p)}
