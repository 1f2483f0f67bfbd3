"""What each device declares when it registers with the server (testbed/selection/base.py's Registry): its
profile's nominal FLOP/s (peak x efficiency), link rates, latency and samples, and the full-model task those
figures predict: latency + downlink bytes / down rate, training FLOPs of its samples / FLOP/s, latency + uplink
bytes / up rate, with the scenario's codecs. Capability tiers and fluctuating rates are not declared."""
from __future__ import annotations

import numpy as np

from testbed.flops import training_flops
from testbed.local import LocalSGD
from testbed.payload import CODECS
from testbed.selection import Registry


def declared(fleet, scenario, shapes: dict, forward_flops: int, num_samples: np.ndarray) -> Registry:
    client = LocalSGD(**scenario.client.model_dump())
    flops_per_s = fleet.peak_flops * fleet.efficiency
    bytes_down, bytes_up = (CODECS[c].nbytes(shapes) for c in (scenario.codec.down, scenario.codec.up))
    # devices of a size share their FLOPs; the sizes found by counting, not sorting (an argsort of 100,000 sizes
    # was most of the kit's construction)
    sizes = np.flatnonzero(np.bincount(num_samples))
    flops_of = np.zeros(sizes[-1] + 1 if len(sizes) else 0)
    flops_of[sizes] = [training_flops(forward_flops, client.samples_processed(int(n))) for n in sizes]
    flops = flops_of[num_samples]
    task_s = 2 * fleet.latency_s + bytes_down / fleet.down_Bps + flops / flops_per_s + bytes_up / fleet.up_Bps
    return Registry(flops_per_s, fleet.down_Bps, fleet.up_Bps, fleet.latency_s, num_samples, task_s,
                    bytes_down=float(bytes_down), bytes_up=float(bytes_up), train_flops=flops)
