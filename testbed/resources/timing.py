"""A task's timeline on a device whose FLOP/s or link rates fluctuate (devices/rates.py).

The task is dispatched at t0 and its phases run back to back, as in testbed/clock.py: the download
waits the latency, then its bytes flow at down_Bps x the bandwidth factor; compute runs its FLOPs at the FLOP/s x
the speed factor; the upload waits the latency, then flows at up_Bps x the bandwidth factor. Each duration
integrates the piecewise-constant factor exactly from the phase's start (Rates.duration); a device whose factor
stays 1 gets today's durations bit for bit. A phase cut short has done what the integral gives up to the cut.
"""
from __future__ import annotations

from dataclasses import dataclass

from testbed.clock import Timeline
from testbed.flops import FLOPS_PER_MULTIPLY_ADD


@dataclass(frozen=True)
class VaryingTimeline(Timeline):
    """A Timeline whose phases start at known instants, so that a cut phase's bytes and FLOPs follow the rates."""

    device: int = -1
    starts: tuple[float, float, float] = (0.0, 0.0, 0.0)  # download, compute, upload
    flops_per_s: float = 0.0
    speed: object = None       # devices.Rates or None
    bandwidth: object = None

    def spent(self, phase: str, elapsed_s: float, full: bool) -> tuple[int, int]:
        if full:
            return super().spent(phase, elapsed_s, full)
        if phase == "compute":
            done = _done(self.speed, self.device, self.starts[1], elapsed_s, self.flops_per_s)
            return 0, min(self.flops, int(done / FLOPS_PER_MULTIPLY_ADD))
        total, rate, start = ((self.bytes_down, self.down_Bps, self.starts[0]) if phase == "download"
                              else (self.bytes_up, self.up_Bps, self.starts[2]))
        flowing = max(0.0, elapsed_s - self.latency_s)
        return min(total, int(_done(self.bandwidth, self.device, start + self.latency_s, flowing, rate))), 0


def _done(rates, device: int, t0: float, seconds: float, rate: float) -> float:
    return seconds * rate if rates is None else rates.amount_done(device, t0, t0 + seconds, rate)


def varying_timeline(device: int, t0: float, bytes_down: int, flops: int, bytes_up: int, latency_s: float,
                     down_Bps: float, up_Bps: float, flops_per_s: float, speed, bandwidth) -> VaryingTimeline:
    """The task's timeline dispatched at t0; speed / bandwidth: the fleet's Rates (None where nothing varies)."""
    def transfer(start: float, nbytes: int, rate: float) -> float:
        flowing = start + latency_s
        return latency_s + (nbytes / rate if bandwidth is None else bandwidth.duration(device, flowing, nbytes, rate))

    work = FLOPS_PER_MULTIPLY_ADD * flops
    download = transfer(t0, bytes_down, down_Bps)
    t_compute = t0 + download  # the additions plan_task makes, so that its phases start at these very instants
    compute = work / flops_per_s if speed is None else speed.duration(device, t_compute, work, flops_per_s)
    t_upload = t_compute + compute
    seconds = (download, compute, transfer(t_upload, bytes_up, up_Bps))
    return VaryingTimeline(bytes_down, flops, bytes_up, latency_s, down_Bps, up_Bps, seconds,
                           device, (t0, t_compute, t_upload), flops_per_s, speed, bandwidth)
