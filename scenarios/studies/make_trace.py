"""Writes phone_sessions.json: a small synthetic availability trace in FedScale's client_behave_trace format.

Not FedScale's data (nothing is downloaded): 40 clients, each alternating online and offline sessions whose
lengths are log-normal (heavy-tailed, sigma 1), replayed every 600 s as FedScale replays `t % finish_time`.
What makes it unlike the Markov on/off process of the study: clients differ. Each client's session scale is
drawn once (log-normal, sigma 0.75), so some phones are online most of the time and others seldom, as in
FedScale's real trace; a Markov fleet has one rate for all. Medians: online 10 s, offline 20 s, the same
one-third-online fleet as the study's markov setting (mean_on_s 10, mean_off_s 20 would be the exponential's).

    python scenarios/studies/make_trace.py      # rewrites scenarios/studies/phone_sessions.json
"""
import json
from pathlib import Path

import numpy as np

CLIENTS, PERIOD_S, SEED = 40, 600.0, 2024
MEDIAN_ON_S, MEDIAN_OFF_S, SIGMA, CLIENT_SIGMA = 10.0, 20.0, 1.0, 0.75


def client_behaviour(rng: np.random.Generator) -> dict:
    scale_on, scale_off = np.exp(rng.normal(0.0, CLIENT_SIGMA, size=2))
    active, inactive = [], []
    t = float(rng.uniform(0, MEDIAN_OFF_S))  # phones start at different instants
    while t < PERIOD_S:
        end = min(PERIOD_S, t + MEDIAN_ON_S * scale_on * rng.lognormal(0.0, SIGMA))
        active.append(round(t, 3))
        inactive.append(round(end, 3))
        t = end + MEDIAN_OFF_S * scale_off * rng.lognormal(0.0, SIGMA)
    return {"active": active, "inactive": inactive, "finish_time": PERIOD_S}


def main() -> None:
    rng = np.random.default_rng(SEED)
    trace = {str(client): client_behaviour(rng) for client in range(CLIENTS)}
    out = Path(__file__).with_name("phone_sessions.json")
    out.write_text(json.dumps(trace, separators=(",", ":")) + "\n")
    online = [sum(e - s for s, e in zip(c["active"], c["inactive"])) / PERIOD_S for c in trace.values()]
    print(f"{out}: {CLIENTS} clients, online fraction mean {np.mean(online):.2f}, "
          f"min {np.min(online):.2f}, max {np.max(online):.2f}")


if __name__ == "__main__":
    main()
