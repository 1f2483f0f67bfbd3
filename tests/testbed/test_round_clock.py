"""A synchronous round's clock computed at once from its tasks' plans (protocols/sync.play_round) against the
per-device simpy processes it replaced (kept here as the reference): the same close, arrivals, drops, cuts and
phases, to the last bit, on randomised small rounds with many exact ties."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import simpy

from testbed.protocols.sync import RoundPlay, play_round
from testbed.clock import PHASES, Phase, plan_task


def _run_task(env, plan, done):
    for p in plan.phases:
        try:
            yield env.timeout(p.delay_s)
        except simpy.Interrupt:
            done.append(replace(p, end_s=env.now, completed=False))
            return "cut"
        done.append(p)
    return plan.outcome


def simpy_round(env, seconds, offline_at, keep, deadline_s):
    """The engine's round before it was computed at once: a simpy process per task, closed by an event."""
    phases, arrived, dropped, closed = [], [], set(), env.event()

    def settle():
        if not closed.triggered and (len(arrived) >= keep or len(arrived) + len(dropped) == len(seconds)):
            closed.succeed()

    def device(d):
        outcome = yield from _run_task(env, plan_task(d, env.now, seconds[d], offline_at[d]), phases)
        if outcome == "arrived":
            arrived.append((env.now, d))
        elif outcome == "dropped":
            dropped.add(d)
        settle()

    procs = [env.process(device(d)) for d in seconds]
    settle()
    yield env.any_of([closed] + ([env.timeout(deadline_s)] if deadline_s else []))
    arrived.sort()
    kept = [d for _, d in arrived[:keep]]
    cut = {d: "dropped" for d in dropped} | {d: "surplus" for _, d in arrived[keep:]}
    still_running = [p for p in procs if p.is_alive]
    for proc in still_running:
        proc.interrupt()
    yield env.all_of(still_running)
    reason = "surplus" if len(kept) >= keep else "late"
    cut |= {d: reason for d in seconds.keys() - set(kept) - cut.keys()}
    return RoundPlay(env.now, kept, cut, sorted(phases, key=lambda p: (p.device, PHASES.index(p.phase))))


def random_round(rng: np.random.Generator):
    """A round of 1-12 tasks whose durations, offline instants and deadline come from a coarse grid (so that
    arrivals, drops, phase ends and the deadline often fall on one instant) or are arbitrary floats."""
    n = int(rng.integers(1, 13))
    grid = rng.random() < 0.7

    def draw(size=None):
        return rng.integers(1, 7, size) * 0.25 if grid else rng.uniform(0.01, 2.0, size)

    t0 = float(rng.choice([0.0, 3.7, 1e4 / 3, 11.289271023406792]))
    seconds = {d: tuple(float(x) for x in draw(3)) for d in range(n)}
    offline_at = {d: math.inf if rng.random() < 0.5 else t0 + float(draw()) * 3 for d in range(n)}
    keep = int(rng.integers(1, n + 2))
    deadline_s = None if rng.random() < 0.4 else float(draw()) * 2
    return t0, seconds, offline_at, keep, deadline_s


@pytest.mark.parametrize("seed", range(400))
def test_computed_round_is_the_simpy_round(seed):
    t0, seconds, offline_at, keep, deadline_s = random_round(np.random.default_rng(seed))
    env = simpy.Environment(initial_time=t0)
    expected = env.run(until=env.process(simpy_round(env, seconds, offline_at, keep, deadline_s)))
    plans = {d: plan_task(d, t0, seconds[d], offline_at[d]) for d in seconds}
    got = play_round(t0, plans, keep, deadline_s)
    assert got == replace(expected, steps=got.steps)
    assert clock_after(t0, got.steps) == got.t_end == env.now


def clock_after(t0: float, steps: tuple[float, ...]) -> float:
    """Where simpy's clock stands after these timeouts from t0 (each lands at now + delay)."""
    env = simpy.Environment(initial_time=t0)
    for step in steps:
        env.run(until=env.timeout(step))
    return env.now


def test_the_clock_lands_on_the_closing_arrival_to_the_bit():
    """From a round start of throttled_phones.yaml, an arrival that no single step from the start lands on (each
    sum rounds to a neighbour): the closing task's own phases do, as the simpy processes did."""
    t0 = 11.289271023406792
    plans = (plan_task(7, t0, (1.1 + k * 0.013, 2.9, 12.3 + k * 1e-3), math.inf) for k in range(1000))
    plan = next(p for p in plans if t0 + (p.end_s - t0) != p.end_s)
    play = play_round(t0, {7: plan}, clients_per_round=1, deadline_s=60.0)
    assert play.t_end == plan.end_s == clock_after(t0, play.steps)


def test_a_two_task_round_by_hand():
    """Device 0: 1 + 2 + 1 s, arrives at 4. Device 1: 1 + 4 + 1 s, offline at 3.5, drops inside its compute.
    Device 2: 0.5 + 1 + 0.5 s, arrives at 2. With K = 1 the round closes at 2: device 2 is kept, device 0 is cut in
    its compute (surplus), device 1 too (its drop at 3.5 comes after the close)."""
    plans = {0: plan_task(0, 0.0, (1.0, 2.0, 1.0), math.inf), 1: plan_task(1, 0.0, (1.0, 4.0, 1.0), 3.5),
             2: plan_task(2, 0.0, (0.5, 1.0, 0.5), math.inf)}
    play = play_round(0.0, plans, clients_per_round=1, deadline_s=None)
    assert (play.t_end, play.used, play.cut) == (2.0, [2], {0: "surplus", 1: "surplus"})
    assert [(p.device, p.phase, p.start_s, p.end_s, p.completed) for p in play.phases] == [
        (0, "download", 0.0, 1.0, True), (0, "compute", 1.0, 2.0, False),
        (1, "download", 0.0, 1.0, True), (1, "compute", 1.0, 2.0, False),
        (2, "download", 0.0, 0.5, True), (2, "compute", 0.5, 1.5, True), (2, "upload", 1.5, 2.0, True)]
    # K = 3: nobody else arrives before device 1 drops at 3.5 and device 0 arrives at 4; a deadline of 3 cuts both
    play = play_round(0.0, plans, clients_per_round=3, deadline_s=3.0)
    assert (play.t_end, play.used, play.cut) == (3.0, [2], {0: "late", 1: "late"})
    play = play_round(0.0, plans, clients_per_round=3, deadline_s=None)
    assert (play.t_end, play.used, play.cut) == (4.0, [2, 0], {1: "dropped"})
    assert [p for p in play.phases if p.device == 1][-1] == Phase(1, "compute", 1.0, 3.5, False, 2.5)
