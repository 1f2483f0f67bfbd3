"""Shared-network solver benchmark: testbed.network.solve on 2,000 flows through 100 cells and one server link.

Each flow crosses its cell's link (flow i in cell i % 100) and the server's link; caps are lognormal around 2 MB/s
(devices' own rates, sigma 0.5), payloads 2.3 MB (cnn_512) unless said. Per regime, ms per solve (best of
--repeat), the events, and the breakpoints (rate changes) kept for moved_by:
- burst, cells bind: all start at 0, cells of 20 MB/s, a server of 1 GB/s (a synchronous round's download);
- burst, server binds: all start at 0, cells of 1 GB/s, a server of 200 MB/s;
- round down / round up: a round's downloads at 0 (cells of 10 MB/s, server 1 GB/s: both bind), then its uploads
  each 5 to 60 s of compute after its download ended;
- spread over 60 s: starts uniform over 60 s, cells of 20 MB/s, server 200 MB/s (an asynchronous server);
- worst cases, where every end changes every other flow's share (one allocation over all flows per event, and
  a breakpoint for each): burst, mixed (payloads 0.5 to 5 MB, cells 20 MB/s, server 300 MB/s) and spread, busy
  (starts over 10 s, cells 5 MB/s, server 50 MB/s).

    python benchmarks/network_fluid.py [--flows 2000] [--cells 100] [--repeat 3]

Measured 2026-11-25 on the project's 2 shared cores (load average 2 to 5, so slower than idle), best of 3, ms:
burst, cells bind 1.9; burst, server binds 1.5; round down 6.8; round up 42.7 (4,000 events); spread over 60 s 6.9
(4,000 events); burst, mixed 920 (2,001 events, 2.0 M breakpoints); spread, busy 2,900 (4,000 events, 4.0 M
breakpoints, about 390 MB at peak). An event that needs an allocation costs about 0.2 ms whatever the flows (numpy
calls), so the worst cases grow as events x flows; where no link is congested, events cost nothing apiece.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from testbed.network import solve


def network(flows, cells, cell_Bps, server_Bps):
    links = np.stack([np.arange(flows) % cells, np.full(flows, cells)], axis=1)
    return links, np.append(np.full(cells, cell_Bps), server_Bps)


def regimes(rng, flows, cells):
    """name -> solve's arguments (a function, so the uploads can follow the downloads' ends)."""
    cap = 2e6 * rng.lognormal(0.0, 0.5, flows)
    payload = np.full(flows, 2.3e6)
    burst = np.zeros(flows)
    down = (burst, payload, cap, *network(flows, cells, 10e6, 1e9))
    yield "burst, cells bind", (burst, payload, cap, *network(flows, cells, 20e6, 1e9))
    yield "burst, server binds", (burst, payload, cap, *network(flows, cells, 1e9, 200e6))
    yield "round down", down
    yield "round up", (solve(*down).end_s + rng.uniform(5.0, 60.0, flows), payload, cap, *down[3:])
    yield "spread over 60 s", (rng.uniform(0.0, 60.0, flows), payload, cap, *network(flows, cells, 20e6, 200e6))
    yield "burst, mixed (worst)", (burst, rng.uniform(0.5e6, 5e6, flows), cap, *network(flows, cells, 20e6, 300e6))
    yield "spread, busy (worst)", (rng.uniform(0.0, 10.0, flows), payload, cap, *network(flows, cells, 5e6, 50e6))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flows", type=int, default=2000)
    parser.add_argument("--cells", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {args.flows} flows, {args.cells} cells + a server")
    for name, inputs in regimes(np.random.default_rng(0), args.flows, args.cells):
        best = np.inf
        for _ in range(args.repeat):
            began = time.perf_counter()
            flows = solve(*inputs)
            best = min(best, time.perf_counter() - began)
        print(f"{name:22s} {best * 1e3:8.1f} ms  {len(flows.event_s):5d} events  {len(flows.break_s):8d} breakpoints"
              f"  mean wait {np.nanmean(flows.waited_s):6.2f} s")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
