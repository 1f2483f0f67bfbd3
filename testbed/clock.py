"""The clock's vocabulary, shared by every protocol and by the resources: one device task on the simulated clock.

A task dispatched at t0 runs its phases back to back: download (latency + bytes/down_Bps), compute (FLOPs /
FLOP/s), upload (latency + bytes/up_Bps); what it costs is its `Timeline`. Its device must stay online over the
whole task: if its on-interval ends inside a phase, the task drops at that instant (whole-interval, not
FedScale's end-instant check). Because the durations and the instant the device goes offline are known at
dispatch, the whole task is planned then (`plan_task`), and a protocol needs only the instants where something
ends: a synchronous round computes its close from its tasks' plans, an asynchronous run wakes at each task's end;
either can cut a task short (`TaskPlan.cut_at`) and keep what it had done.

Plain data and arithmetic only: no simpy here, so that resources and algorithms can speak of phases without
importing the protocols that drive the clock.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

PHASES = ("download", "compute", "upload")


@dataclass(frozen=True)
class Timeline:
    """What one task costs: bytes, FLOPs, and the seconds each phase takes on its device."""

    bytes_down: int
    flops: int
    bytes_up: int
    latency_s: float
    down_Bps: float
    up_Bps: float
    seconds: tuple[float, float, float]  # download, compute, upload

    def spent(self, phase: str, elapsed_s: float, full: bool) -> tuple[int, int]:
        """(bytes, FLOPs) spent in `phase`: all of it if `full`, else linear in `elapsed_s` after the latency."""
        if phase == "compute":
            return 0, self.flops if full else int(self.flops * elapsed_s / self.seconds[1])
        total, rate = (self.bytes_down, self.down_Bps) if phase == "download" else (self.bytes_up, self.up_Bps)
        return (total if full else min(total, int(max(0.0, elapsed_s - self.latency_s) * rate))), 0


@dataclass(frozen=True)
class Phase:
    """One phase of a device on the clock (download, compute, upload; "idle" for a wait) from start_s to end_s;
    `completed`: False where it was cut (a drop, a deadline) before its work was done."""

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
