"""Fleet build: Markov availability of N devices, batched (MarkovOnOff.sample_flat) against the per-device path it
replaced (one generator, block loop and merge_intervals per device), interleaved in one process; then the whole
build of scale.yaml (fleet, data, partition) and the peak memory.

The two availability paths give the same intervals bit for bit (tests/devices/test_availability_models.py); the
script checks the row count and the last device's rows on top.

    python benchmarks/fleet_build.py [--devices 100000] [--repeat 2] [--million]
"""
from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np

from _harness import HERE, build, machine
from devices.availability import DAY_S, MarkovOnOff
from devices.seeding import child_seed, device_rng

# scale.yaml's three classes, in its proportions
CLASSES = [(MarkovOnOff(600, 300), 0.3), (MarkovOnOff(300, 300), 0.4), (MarkovOnOff(120, 300), 0.3)]


def per_device(n: int, seed: np.random.SeedSequence) -> tuple[int, np.ndarray]:
    rows, last = 0, None
    for g, (model, share) in enumerate(CLASSES):
        group = child_seed(seed, g)
        for i in range(int(n * share)):
            last = model._device_intervals(device_rng(group, i), DAY_S)
            rows += len(last)
    return rows, last


def batched(n: int, seed: np.random.SeedSequence) -> tuple[int, np.ndarray]:
    rows, last = 0, None
    for g, (model, share) in enumerate(CLASSES):
        starts, ends, counts = model.sample_flat(child_seed(seed, g), int(n * share), DAY_S)
        rows += len(starts)
        last = np.column_stack([starts[-counts[-1]:], ends[-counts[-1]:]])
    return rows, last


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def fleet_only(n: int) -> None:
    """Fleet.build of scale.yaml's groups scaled to n devices, as a run builds it (first availability sample: an
    hour), and one availability query; the time of each and the process's peak RSS."""
    import devices
    from testbed.scenario import load

    scenario = load(HERE / "scale.yaml")
    scale = n / sum(g.count for g in scenario.fleet.groups)
    specs = [replace(spec, count=round(spec.count * scale)) for spec in scenario.fleet.specs()]
    t, fleet = timed(devices.Fleet.build, specs, np.random.SeedSequence(0))
    t_query, online = timed(fleet.availability.online_at, 10.0)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2
    print(f"Fleet.build of scale.yaml's groups at {fleet.n:,} devices: {t:.2f} s "
          f"({len(fleet.availability._starts):,} on-intervals); online_at: {1000 * t_query:.0f} ms "
          f"({int(online.sum()):,} online); peak RSS {peak_gb:.2f} GB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--devices", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--million", action="store_true",
                        help="also the batched path alone, and a whole Fleet.build, at 1,000,000 devices")
    parser.add_argument("--fleet-only", type=int, metavar="N", help="only Fleet.build at N devices")
    args = parser.parse_args()
    if args.fleet_only:
        return fleet_only(args.fleet_only)
    print(machine())
    seed = np.random.SeedSequence(0)
    best = {"per-device": float("inf"), "batched": float("inf")}
    for _ in range(args.repeat):   # interleaved, best of each
        t_old, old = timed(per_device, args.devices, seed)
        t_new, new = timed(batched, args.devices, seed)
        assert old[0] == new[0] and np.array_equal(old[1], new[1]), "the two paths disagree"
        best["per-device"], best["batched"] = min(best["per-device"], t_old), min(best["batched"], t_new)
    print(f"Markov availability, {args.devices:,} devices, one day: {old[0]:,} on-intervals")
    print(f"  per-device {best['per-device']:.2f} s   batched {best['batched']:.2f} s   "
          f"speedup {best['per-device'] / best['batched']:.2f}x")
    if args.million:
        t, (rows, _) = timed(batched, 1_000_000, seed)
        print(f"  batched at 1,000,000 devices: {t:.2f} s, {rows:,} on-intervals")
        # a fresh process, so that its peak RSS is the fleet's alone
        subprocess.run([sys.executable, __file__, "--fleet-only", "1000000"], check=True)
    t, _ = timed(build, HERE / "scale.yaml")
    print(f"build of scale.yaml (100,000 devices, data, partition): {t:.2f} s")
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2:.2f} GB")


if __name__ == "__main__":
    main()
