"""One device task on the simulated clock, shared by every protocol: download, compute, upload, or a drop.

A task dispatched at t0 runs its phases back to back: download (latency + bytes/down_Bps), compute (FLOPs /
FLOP/s), upload (latency + bytes/up_Bps). Its device must stay online over the whole task: if its on-interval
ends inside a phase, the task drops at that instant (whole-interval, not FedScale's end-instant check). Because
the durations and the instant the device goes offline are known at dispatch, the whole task is planned then
(`plan_task`), and a protocol needs only the instants where something ends: a synchronous round computes its
close from its tasks' plans, an asynchronous run wakes at each task's end; either can cut a task short
(`TaskPlan.cut_at`) and keep what it had done.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import simpy

PHASES = ("download", "compute", "upload")


@dataclass(frozen=True)
class Phase:
    device: int
    phase: str
    start_s: float
    end_s: float
    completed: bool
    delay_s: float = 0.0   # the clock advance that takes start_s to end_s (end_s == start_s + delay_s, exactly)


@dataclass(frozen=True)
class TaskPlan:
    """A task's phases as they will play out, and how it ends: "arrived" (upload done) or "dropped"."""

    phases: tuple[Phase, ...]
    outcome: str

    @property
    def end_s(self) -> float:
        return self.phases[-1].end_s

    def cut_at(self, t: float, starting: bool = False) -> list[Phase]:
        """The phases as they stand at instant t, when the task is cut there: those done by t, and the one
        under way, ending at t; a phase that would only start at t is not there, unless `starting`, where it is
        kept with no length (a synchronous round's close: its previous phase ended at that very instant)."""
        out = []
        for p in self.phases:
            if p.start_s > t or (p.start_s == t and not starting):
                break
            out.append(p if p.end_s <= t and p.completed else replace(p, end_s=t, completed=False))
        return out


def plan_task(device: int, t0: float, seconds: tuple[float, float, float], offline_at: float) -> TaskPlan:
    """The task of `device` dispatched at t0 with these phase durations, if its device is online until
    offline_at. Times are the ones simpy reaches by the same additions (start + duration)."""
    phases, start = [], t0
    for phase, duration in zip(PHASES, seconds):
        if start + duration > offline_at:  # goes offline inside this phase: drops at that instant
            delay = offline_at - start
            phases.append(Phase(device, phase, start, start + delay, False, delay))
            return TaskPlan(tuple(phases), "dropped")
        phases.append(Phase(device, phase, start, start + duration, True, duration))
        start += duration
    return TaskPlan(tuple(phases), "arrived")


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
