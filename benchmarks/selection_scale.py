"""Selection scale benchmark: one selection at 100,000 devices, K = 1,000, for every registered selector.

scale.yaml's fleet (100,000 Markov phones, benchmarks/scale.py) with a History filled with plausible observations:
a third of the fleet has taken 1 to 5 tasks so far (measured durations its registered task time times a lognormal
factor, mostly arrivals, some drops, training losses that fall with the round), and the server has listed who was
online at 20 earlier instants. For each selector of testbed.selection.SELECTORS, with its default options:
- a synchronous round's selection: K = 1,000 among the devices online at t (about 48,600), ms per call, best of
  --repeat (each call is given a fresh context, as a round is; the history is left as filled);
- an asynchronous dispatch of --slots free slots (selectors with ASYNC), the candidates listed only where the
  selector asks for them, ms per call;
- the engine's round time with that selector: scale.yaml with `selection: {name: ...}`, scale.py's zero-update
  executor, ms per round (as scale.py reports it; the issue's bound is 30 ms).
FedCS gets a 60 s deadline (scale.yaml has none) and power_of_choice its reported losses (OPTIONS below).
A selector that cannot run here says why on its row; the others go on.

    python benchmarks/selection_scale.py [--repeat 5] [--slots 10] [--rounds 10] [--no-engine]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

from _harness import HERE, build, machine, warm_up_torch_func
from async_scale import timed
from scale import TARGET_MS
from testbed.protocols.kit import Kit
from testbed.selection import SELECTORS, Outcome, SelectionContext

SCENARIO = HERE / "scale.yaml"
K = 1000
# options where a default cannot run here: scale.yaml has no round deadline for FedCS, and a probe trains nothing
# under scale.py's zero-update executor (power_of_choice's probing is timed by its round in the engine column)
OPTIONS = {"fedcs": {"deadline_s": 60.0}, "power_of_choice": {"loss": "reported"}}


def observed(kit: Kit, rng: np.random.Generator, now: float) -> None:
    """Fill the kit's history with what a server could have seen by `now` (round 21): see the docstring."""
    history, registry, n = kit.participation.history, kit.participation.registry, kit.fleet.n
    for i in range(20):
        kit.participation.looked(rng.random(n) < 0.49, now * i / 20)
    seen = rng.choice(n, n // 3, replace=False)
    for r in range(1, 21):
        devices = np.sort(seen[rng.random(len(seen)) < 0.15])
        history.dispatched(devices, r)
        duration = registry.task_s[devices] * rng.lognormal(0.0, 0.5, len(devices))
        dropped = rng.random(len(devices)) < 0.1
        loss = 2.3 * math.exp(-r / 10) * rng.lognormal(0.0, 0.3, len(devices))
        history.record([Outcome(int(d), r, "dropped" if drop else "arrived", 0.0, float(s),
                                {} if drop else {"train_loss": float(l), "train_loss_sq": float(l * l * 1.2)})
                        for d, drop, s, l in zip(devices.tolist(), dropped.tolist(), duration.tolist(),
                                                 loss.tolist())])


def time_select(selector, state, make_ctx, rng, repeat: int) -> float:
    """Best seconds of one select call over `repeat` calls, each with a fresh context, from the same state."""
    best = math.inf
    for _ in range(repeat):
        ctx = make_ctx()
        start = time.perf_counter()
        picked, _ = selector.select(state, ctx, rng)
        best = min(best, time.perf_counter() - start)
        if len(picked) > ctx.n_select or len(np.unique(picked)) < len(picked):
            raise AssertionError(f"picked {len(picked)} devices for {ctx.n_select}")
    return best


def selections(name: str, exp, repeat: int, slots: int) -> tuple[float, float | None]:
    """ms of a synchronous round's selection and of an asynchronous dispatch's (None: not an async selector)."""
    kit = Kit(exp, on_round=lambda row, events: None)
    kit.participation.selector = SELECTORS[name](**OPTIONS.get(name, {}))
    state = kit.participation.selector.init(kit.participation.registry, 20, K)
    rng = np.random.default_rng(0)
    now = 60.0
    observed(kit, rng, now)
    availability = kit.fleet.availability
    online = availability.online_at(now)
    candidates = np.flatnonzero(online)
    busy = np.zeros(kit.fleet.n, dtype=bool)
    busy[rng.choice(candidates, K, replace=False)] = True  # the async run's tasks in flight

    picks = kit.participation

    def sync_ctx() -> SelectionContext:
        return SelectionContext(21, now, K, picks.registry, picks.history, lambda: candidates,
                                lambda d: bool(online[d]), usable_each=lambda devices: online[devices])

    def usable_each(devices: np.ndarray) -> np.ndarray:
        return ~busy[devices] & availability.online_each(devices, now)

    def async_ctx() -> SelectionContext:
        return SelectionContext(4000, now, slots, picks.registry, picks.history,
                                lambda: np.flatnonzero(online & ~busy), lambda d: bool(usable_each(np.array([d]))[0]),
                                asynchronous=True, usable_each=usable_each)

    sync_s = time_select(picks.selector, state, sync_ctx, rng, repeat)
    async_s = time_select(picks.selector, state, async_ctx, rng, repeat) if picks.selector.ASYNC else None
    return 1000 * sync_s, None if async_s is None else 1000 * async_s


def round_ms(name: str, rounds: int) -> float:
    seconds, records = timed([f"stop.max_rounds={rounds}", f"eval.every_rounds={rounds}",
                              f"selection={{name: {name}, options: {OPTIONS.get(name, {})}}}"], profile=False)
    return 1000 * seconds / len(records)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="select calls per selector and kind (best kept)")
    parser.add_argument("--slots", type=int, default=10, help="free slots of the asynchronous dispatch")
    parser.add_argument("--rounds", type=int, default=10, help="engine rounds per selector")
    parser.add_argument("--no-engine", action="store_true", help="time the selections only")
    args = parser.parse_args(argv)
    print(f"selection_scale on {machine()}; load average {os.getloadavg()[0]:.2f}")
    warm_up_torch_func()
    exp, why = build(SCENARIO, [])
    if exp is None:
        raise SystemExit(f"error: {why}")
    print(f"{exp.fleet.n:,} devices; selectors: {', '.join(SELECTORS)}\n")
    print(f"| selector | sync selection, K = {K:,} (ms) | async dispatch, {args.slots} slots (ms) | "
          f"engine ms per round (target <= {TARGET_MS:.0f}) |")
    print("|---|---|---|---|")
    for name in SELECTORS:
        try:
            sync_ms, async_ms = selections(name, exp, args.repeat, args.slots)
            engine = "not run" if args.no_engine else f"{round_ms(name, args.rounds):.1f}"
            print(f"| {name} | {sync_ms:.2f} | {'not async' if async_ms is None else f'{async_ms:.3f}'} | "
                  f"{engine} |", flush=True)
        except Exception as error:  # a selector being written may not run here yet: say why, go on
            print(f"| {name} | failed: {type(error).__name__}: {error} | | |", flush=True)
    print(f"\n(load average {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
