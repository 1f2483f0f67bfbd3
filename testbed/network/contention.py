"""Tasks dispatched together, their transfers through the shared links solved jointly (testbed/network/fluid.py).

A task's phases run as in testbed/clock.py: download, compute, upload, each transfer waiting its device's
latency before its bytes flow. Through shared links a flow's bytes move at its max-min fair rate (capped by the
device's own rate), so its duration is found by solving every flow of the batch together:
- downloads start flowing at t0 + latency; each is cut where its device goes offline first (offline_at);
- a completed download starts the compute, whose seconds are the device's own; the upload flows from the
  compute's end + latency, through the uplinks, cut as the download is;
- downlinks and uplinks are separate links (a cell's two directions, the server's egress and ingress), so the
  downloads are solved first and the uploads from the instants those give.
A transfer cut at offline_at gets an infinite duration, which the task's plan (clock.plan_task) turns into a drop
at that very instant. Its partial bytes, and those of a transfer a round's close cuts, follow the flow's solved
profile (SharedTimeline.spent), so bytes are conserved.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from testbed.clock import Timeline
from testbed.network.topology import Topology

Profile = tuple[tuple[float, ...], tuple[float, ...]]   # a flow's (instants, bytes moved by each)


@dataclass(frozen=True)
class SharedTimeline(Timeline):
    """A Timeline whose transfers went through shared links: what each moved by any instant is its flow's."""

    starts: tuple[float, float, float] = (0.0, 0.0, 0.0)   # download, compute, upload phase starts
    down_profile: Profile = ((), ())
    up_profile: Profile = ((), ())
    private_s: tuple[float, float] = (0.0, 0.0)           # the two transfers' seconds on the device's links alone

    def spent(self, phase: str, elapsed_s: float, full: bool) -> tuple[int, int]:
        if full or phase == "compute":
            return super().spent(phase, elapsed_s, full)
        total, (times, moved), start = ((self.bytes_down, self.down_profile, self.starts[0]) if phase == "download"
                                        else (self.bytes_up, self.up_profile, self.starts[2]))
        if not times:
            return 0, 0
        return min(total, int(np.interp(start + elapsed_s, times, moved, left=0.0))), 0

    @property
    def waited_s(self) -> float:
        """Seconds the shared links added to its transfers (inf where a transfer was cut)."""
        return self.seconds[0] + self.seconds[2] - self.private_s[0] - self.private_s[1]


def contend(topology: Topology, t0: float, devices: np.ndarray, timelines: list[Timeline],
            offline_at: np.ndarray, server: bool = True) -> list[SharedTimeline]:
    """These devices' tasks dispatched at t0 (their private timelines, in the same order), through their cells'
    links and, with `server`, the server's (without: to and from their cell's edge server)."""
    devices = np.asarray(devices, dtype=np.int64)
    latency = np.array([tl.latency_s for tl in timelines])
    down_bytes = np.array([float(tl.bytes_down) for tl in timelines])
    up_bytes = np.array([float(tl.bytes_up) for tl in timelines])
    compute = np.array([tl.seconds[1] for tl in timelines])
    down = _solve(topology, "down", devices, t0 + latency, down_bytes,
                  np.array([tl.down_Bps for tl in timelines]), offline_at, server)
    down_s = _seconds(down, t0, [tl.seconds[0] for tl in timelines])
    t_compute = t0 + down_s                 # the additions plan_task makes, so the phases start at these instants
    t_upload = t_compute + compute
    uploading = np.isfinite(t_upload) & (t_upload + latency < offline_at)
    up_s = np.full(len(devices), math.inf)
    up_profiles: list[Profile] = [((), ())] * len(devices)
    if uploading.any():
        which = np.flatnonzero(uploading)
        up = _solve(topology, "up", devices[which], (t_upload + latency)[which], up_bytes[which],
                    np.array([timelines[i].up_Bps for i in which]), offline_at[which], server)
        up_s[which] = _seconds(up, t_upload[which], [timelines[i].seconds[2] for i in which.tolist()])
        for j, i in enumerate(which.tolist()):
            up_profiles[i] = up.profile(j)
    return [SharedTimeline(tl.bytes_down, tl.flops, tl.bytes_up, tl.latency_s, tl.down_Bps, tl.up_Bps,
                           (float(down_s[i]), tl.seconds[1], float(up_s[i])),
                           (t0, float(t_compute[i]), float(t_upload[i])), down.profile(i), up_profiles[i],
                           (tl.seconds[0], tl.seconds[2]))
            for i, tl in enumerate(timelines)]


def _seconds(flows, t_phase: np.ndarray | float, private_s: list[float]) -> np.ndarray:
    """Each transfer phase's seconds from t_phase: its private seconds, bit for bit, where the links never slowed
    it (so that links that never bind change no instant); inf where it was cut."""
    contended = np.where(flows.done, flows.end_s - t_phase, math.inf)
    return np.where(flows.done & (flows.waited_s == 0), np.array(private_s), contended)


def _solve(topology: Topology, direction: str, devices: np.ndarray, start_s: np.ndarray, nbytes: np.ndarray,
           cap_Bps: np.ndarray, stop_s: np.ndarray, server: bool):
    from testbed.network import fluid   # TODO(merge of the fluid solver): a top-level import
    return fluid.solve(start_s, nbytes, cap_Bps, topology.links(devices, direction, server),
                       topology.capacity[direction], stop_s=stop_s)
