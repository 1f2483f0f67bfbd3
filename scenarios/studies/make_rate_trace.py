"""Writes throttle_trace.csv: a small synthetic rate trace of thermal throttling, for devices.load_rate_trace.

Not measured data (nothing is downloaded): 20 devices over one hour, each alternating full speed (factor 1) and
throttled episodes whose factor is drawn per episode, uniform in [0.4, 0.8]. Episode lengths are log-normal
(heavy-tailed, sigma 0.8) with medians 240 s at full speed and 90 s throttled; each device starts full speed or
throttled at random. Every trace ends with a row (3600, 1): past the hour the device runs at full speed for
good, and a TraceRate with period_s=3600 replays the hour instead (the row at 3600 is then never reached).

Format (CSV, header device,t_s,factor): device is an integer trace id; a device's rows have strictly increasing
t_s from 0 and factor > 0; the factor of a row holds until the device's next row.

    python scenarios/studies/make_rate_trace.py      # rewrites scenarios/studies/throttle_trace.csv
"""
import csv
from pathlib import Path

import numpy as np

DEVICES, HORIZON_S, SEED = 20, 3600.0, 2025
MEDIAN_FULL_S, MEDIAN_THROTTLED_S, SIGMA = 240.0, 90.0, 0.8
THROTTLE_RANGE = (0.4, 0.8)
MIN_EPISODE_S = 1.0  # times are written to 0.1 s; no episode collapses to nothing


def device_steps(rng: np.random.Generator) -> list[tuple[float, float]]:
    """(t_s, factor) rows of one device over the hour, then full speed at the hour."""
    throttled = rng.random() < MEDIAN_THROTTLED_S / (MEDIAN_FULL_S + MEDIAN_THROTTLED_S)
    rows, t = [], 0.0
    while t < HORIZON_S:
        median = MEDIAN_THROTTLED_S if throttled else MEDIAN_FULL_S
        factor = round(float(rng.uniform(*THROTTLE_RANGE)), 2) if throttled else 1.0
        rows.append((round(t, 1), factor))
        t += max(MIN_EPISODE_S, median * rng.lognormal(0.0, SIGMA))
        throttled = not throttled
    rows.append((HORIZON_S, 1.0))
    return rows


def mean_factor(rows: list[tuple[float, float]]) -> float:
    """Time-weighted mean factor over [0, HORIZON_S)."""
    times = np.array([t for t, _ in rows])
    factors = np.array([f for _, f in rows])
    return float(np.sum(factors[:-1] * np.diff(times)) / HORIZON_S)


def main() -> None:
    rng = np.random.default_rng(SEED)
    traces = [device_steps(rng) for _ in range(DEVICES)]
    out = Path(__file__).with_name("throttle_trace.csv")
    with open(out, "w", newline="") as file:
        writer = csv.writer(file, lineterminator="\n")
        writer.writerow(["device", "t_s", "factor"])
        for device, rows in enumerate(traces):
            writer.writerows((device, f"{t:g}", f"{factor:g}") for t, factor in rows)
    means = [mean_factor(rows) for rows in traces]
    print(f"{out}: {DEVICES} devices over {HORIZON_S:g} s, {sum(len(r) for r in traces)} rows, mean factor "
          f"{np.mean(means):.2f} (min {np.min(means):.2f}, max {np.max(means):.2f})")


if __name__ == "__main__":
    main()
