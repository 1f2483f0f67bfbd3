"""Shared-network solver benchmark: testbed.network.solve on 2,000 flows through 100 cells and one server link.

Each flow crosses its cell's link (flow i in cell i % 100) and the server's link; caps are lognormal around 2 MB/s
(devices' own rates), payloads 2.3 MB (cnn_512). Three regimes, ms per solve (best of --repeat) and the events:
- burst, cells bind: all start at 0, cells of 20 MB/s, a server of 1 GB/s (a synchronous round's download);
- burst, server binds: all start at 0, cells of 1 GB/s, a server of 200 MB/s;
- burst, mixed: all start at 0 with payloads of 0.5 to 5 MB, cells of 20 MB/s, a server of 300 MB/s: flows end
  one by one and every end changes the shares of the others (the worst case: one allocation per event);
- spread: starts uniform over 60 s, cells of 20 MB/s, server 200 MB/s (an asynchronous server's uploads);
- spread, busy: starts uniform over 10 s, cells of 5 MB/s, server 50 MB/s (links bind most of the time).

    python benchmarks/network_fluid.py [--flows 2000] [--cells 100] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from testbed.network import solve


def instance(rng, flows, cells, cell_Bps, server_Bps, spread_s, mixed=False):
    start = rng.uniform(0.0, spread_s, flows) if spread_s else np.zeros(flows)
    size = rng.uniform(0.5e6, 5e6, flows) if mixed else np.full(flows, 2.3e6)
    cap = 2e6 * rng.lognormal(0.0, 0.5, flows)
    links = np.stack([np.arange(flows) % cells, np.full(flows, cells)], axis=1)
    capacity = np.append(np.full(cells, cell_Bps), server_Bps)
    return start, size, cap, links, capacity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flows", type=int, default=2000)
    parser.add_argument("--cells", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    rng = np.random.default_rng(0)
    regimes = {"burst, cells bind": (20e6, 1e9, 0.0, False), "burst, server binds": (1e9, 200e6, 0.0, False),
               "burst, mixed": (20e6, 300e6, 0.0, True), "spread over 60 s": (20e6, 200e6, 60.0, False),
               "spread, busy": (5e6, 50e6, 10.0, False)}
    for name, (cell, server, spread, mixed) in regimes.items():
        inputs = instance(rng, args.flows, args.cells, cell, server, spread, mixed)
        best = np.inf
        for _ in range(args.repeat):
            began = time.perf_counter()
            flows = solve(*inputs)
            best = min(best, time.perf_counter() - began)
        print(f"{name:22s} {best * 1e3:8.1f} ms  {len(flows.event_s):5d} events  "
              f"{len(flows.break_s):8d} breakpoints  last end {flows.end_s.max():.2f} s")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
