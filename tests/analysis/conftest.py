"""Run folders written by hand, small enough to check every number against by hand.

tiny run: 3 devices (a, b, c), 5 rounds; evaluated in rounds 2, 4, 5 (rounds 1 and 3 have NaN accuracy).
Events exist for rounds 1, 2 and 5: in round 1 b drops during compute, in round 2 b's upload is late,
in round 5 c's upload is cut as surplus.
"""

import io

import matplotlib.figure
import numpy as np
import pandas as pd
import PIL.Image
import pytest

SCENARIO = """\
name: {name}
seed: {seed}
algorithm: {{name: {algorithm}}}
stop: {{target_accuracy: 0.8, max_rounds: 5}}
"""

ROUNDS = """\
round,t_start_s,t_end_s,selected,arrived,dropped,late,surplus,bytes_up,bytes_down,flops,wasted_flops,wasted_bytes,accuracy,loss
1,0.0,10.0,3,2,1,0,0,2000,3000,600,100,500,,
2,10.0,25.0,3,2,0,1,0,3000,3000,600,200,1000,0.42,1.9
3,25.0,40.0,3,3,0,0,0,3000,3000,900,0,0,,
4,40.0,52.5,3,3,0,0,0,3000,3000,900,0,0,0.81,0.7
5,52.5,60.0,3,2,0,0,1,3000,3000,900,300,1000,0.79,0.75
"""

EVENTS = """\
device,round,phase,start_s,end_s,outcome
a,1,download,0.0,1.0,done
a,1,compute,1.0,5.0,done
a,1,upload,5.0,6.0,done
b,1,download,0.0,2.0,done
b,1,compute,2.0,4.0,dropped
c,1,download,0.0,1.0,done
c,1,compute,1.0,7.0,done
c,1,upload,7.0,9.0,done
a,2,download,10.0,11.0,done
a,2,compute,11.0,15.0,done
a,2,upload,15.0,16.5,done
b,2,download,10.0,12.0,done
b,2,compute,12.0,20.0,done
b,2,upload,20.0,25.0,late
c,2,download,10.0,11.0,done
c,2,compute,11.0,17.0,done
c,2,upload,17.0,19.0,done
a,5,download,52.5,53.5,done
a,5,compute,53.5,56.0,done
a,5,upload,56.0,57.0,done
b,5,download,52.5,54.0,done
b,5,compute,54.0,57.0,done
b,5,upload,57.0,58.0,done
c,5,download,52.5,53.5,done
c,5,compute,53.5,57.5,done
c,5,upload,57.5,58.0,surplus
"""


def write_run(folder, rounds=ROUNDS, events=EVENTS, seed=0, algorithm="fedavg", name="tiny"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scenario.resolved.yaml").write_text(SCENARIO.format(name=name, seed=seed, algorithm=algorithm))
    (folder / "rounds.csv").write_text(rounds)
    (folder / "events.csv").write_text(events)
    return folder


SLOWER = {"0.81,0.7": "0.6,0.9", "0.79,0.75": "0.85,0.5"}  # 0.8 first reached in round 5, at 60 s
FASTER = {"0.42,1.9": "0.85,0.4"}                          # 0.8 first reached in round 2, at 25 s


def write_study(root):
    """A heterogeneity study of tiny runs in root/runs: fedavg and fedlps at two levels; fedavg at low has two
    seeds. Returns the run folders."""
    def run(algorithm, level, seed, changes=None):
        rounds = ROUNDS
        for old, new in (changes or {}).items():
            rounds = rounds.replace(old, new)
        name = f"tiny-{algorithm}-{level}"  # as testbed sweep names them
        folder = write_run(root / "runs" / name / str(seed), rounds=rounds, seed=seed, algorithm=algorithm,
                           name=name)
        with open(folder / "scenario.resolved.yaml", "a") as scenario:
            scenario.write(f"fleet: {{heterogeneity: {level}}}\n")
        return folder

    return [run("fedavg", "low", 0), run("fedavg", "low", 1, SLOWER), run("fedlps", "low", 0, FASTER),
            run("fedavg", "high", 0, SLOWER), run("fedlps", "high", 0)]


@pytest.fixture
def study(tmp_path):
    return write_study(tmp_path)


@pytest.fixture
def unrendered(monkeypatch):
    """Figures written as one-pixel images, not drawn, for tests of what a report or comparison reads, lists and
    tabulates: drawing the figures is most of their time (test_html_report.py and the plot tests look at them)."""
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda self, path, **kwargs: PIL.Image.new(
        "RGB", (1, 1)).save(path))


@pytest.fixture(scope="session")
def make_study():
    """write_study, for fixtures wider than one test."""
    return write_study


@pytest.fixture
def make_run():
    """write_run, for tests that need more than one run folder (tests import no helper modules)."""
    return write_run


@pytest.fixture
def make_synthetic_run():
    return write_synthetic_run


@pytest.fixture
def rounds_csv():
    return ROUNDS


@pytest.fixture
def run_dir(tmp_path):
    return write_run(tmp_path / "runs" / "tiny" / "0")


@pytest.fixture
def rounds():
    return pd.read_csv(io.StringIO(ROUNDS))


@pytest.fixture
def events():
    return pd.read_csv(io.StringIO(EVENTS))


def write_synthetic_run(folder, devices=13, rounds=3, seed=0):
    """A plausible run for looking at plots: devices with spread-out speeds, a deadline, a few
    dropouts, and accuracy evaluated every other round."""
    rng = np.random.default_rng(seed)
    speed = rng.uniform(0.5, 3.0, devices)
    event_rows, round_rows, now = [], [], 0.0
    for r in range(1, rounds + 1):
        deadline, start = now + 40.0, now
        outcomes = {"dropped": 0, "late": 0}
        for d in range(devices):
            t, device = start, f"phone-{d + 1}"
            for phase, base in (("download", 3.0), ("compute", 15.0), ("upload", 5.0)):
                end = t + base * speed[d] * rng.uniform(0.8, 1.2)
                outcome = "done"
                if rng.random() < 0.04:
                    end, outcome = rng.uniform(t, end), "dropped"
                elif end > deadline:
                    end, outcome = deadline, "late"
                event_rows.append((device, r, phase, round(t, 3), round(end, 3), outcome))
                t = end
                if outcome != "done":
                    outcomes[outcome] += 1
                    break
        now = deadline + 1.0
        accuracy = 0.3 + 0.5 * (1 - np.exp(-r / 4)) if r % 2 == 0 or r == rounds else None
        round_rows.append((r, start, now, devices, devices - sum(outcomes.values()), outcomes["dropped"],
                           outcomes["late"], 0, 400_000 * devices, 400_000 * devices, 3e11 * devices,
                           3e10, 100_000, accuracy, None if accuracy is None else 1.0 - accuracy))
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(event_rows, columns=["device", "round", "phase", "start_s", "end_s", "outcome"]).to_csv(
        folder / "events.csv", index=False)
    pd.DataFrame(round_rows, columns=ROUNDS.splitlines()[0].split(",")).to_csv(folder / "rounds.csv", index=False)
    (folder / "scenario.resolved.yaml").write_text(SCENARIO.format(name="synthetic", seed=seed, algorithm="fedavg"))
    return folder


# An async run (FedBuff: concurrency 2, buffer_size 2, max_staleness 1, stop at 12 s) of devices a, b
# (phone_high) and c (phone_low); d (phone_high) never gets a task. Tasks in dispatch order:
#   1 a v0 0-3 done (agg 1)     2 c v0 0-6 done, staleness 1 (agg 2)   3 a v0 3-5 done (agg 1)
#   4 b v1 5-7 done (agg 2)     5 c v1 6-11.5 stale: staleness 2 > 1   6 a v2 7-8.5 dropped (a offline to 9.5)
#   7 b v2 8.5-10 done (agg 3)  8 a v2 10-11 done (agg 3)               9 b v3 11-11.75 done (agg 4)
#   10 c v3, 11 b v3: cut at 12 s in their download (unfinished)
# Aggregations at 5, 7, 11 and 12 s. a has two tasks in window 1; (a, 3) holds a dropped and a used task,
# (b, 4) a used and an unfinished one: (device, round) is no task key here.
ASYNC_SCENARIO = SCENARIO + """\
protocol: {{kind: async, concurrency: 2, buffer_size: 2, max_staleness: 1}}
"""

ASYNC_ROUNDS = """\
round,t_start_s,t_end_s,online,selected,arrived,dropped,late,surplus,bytes_up,bytes_down,flops,wasted_flops,wasted_bytes,accuracy,loss,stale,unfinished,staleness_mean,staleness_max
1,0.0,5.0,4,3,2,0,0,0,200,200,200,0,0,,,0,0,0.0,0
2,5.0,7.0,4,2,2,0,0,0,200,200,200,0,0,0.5,1.2,0,0,0.5,1
3,7.0,11.0,4,3,2,1,0,0,200,300,250,50,100,,,0,0,0.0,0
4,11.0,12.0,4,3,1,0,0,0,200,275,200,100,275,0.7,0.9,1,2,0.0,0
"""

ASYNC_EVENTS = """\
device,round,phase,start_s,end_s,outcome,ratio,task,version,staleness
a,1,download,0.0,1.0,done,,1,0,0
a,1,compute,1.0,2.0,done,,1,0,0
a,1,upload,2.0,3.0,done,,1,0,0
a,1,download,3.0,3.5,done,,3,0,0
a,1,compute,3.5,4.0,done,,3,0,0
a,1,upload,4.0,5.0,done,,3,0,0
c,2,download,0.0,1.0,done,,2,0,1
c,2,compute,1.0,5.5,done,,2,0,1
c,2,upload,5.5,6.0,done,,2,0,1
b,2,download,5.0,6.0,done,,4,1,0
b,2,compute,6.0,6.5,done,,4,1,0
b,2,upload,6.5,7.0,done,,4,1,0
b,3,download,8.5,9.0,done,,7,2,0
b,3,compute,9.0,9.5,done,,7,2,0
b,3,upload,9.5,10.0,done,,7,2,0
a,3,download,10.0,10.5,done,,8,2,0
a,3,compute,10.5,10.75,done,,8,2,0
a,3,upload,10.75,11.0,done,,8,2,0
a,3,download,7.0,8.0,dropped,,6,2,
a,3,compute,8.0,8.5,dropped,,6,2,
b,4,download,11.0,11.25,done,,9,3,0
b,4,compute,11.25,11.5,done,,9,3,0
b,4,upload,11.5,11.75,done,,9,3,0
c,4,download,6.0,7.0,stale,,5,1,
c,4,compute,7.0,11.0,stale,,5,1,
c,4,upload,11.0,11.5,stale,,5,1,
c,4,download,11.5,12.0,unfinished,,10,3,
b,4,download,11.75,12.0,unfinished,,11,3,
"""

ASYNC_DEVICES = """\
device,group,profile
a,0,phone_high
b,0,phone_high
c,1,phone_low
d,0,phone_high
"""


def write_async_run(folder, seed=0, name="tiny-async", devices=ASYNC_DEVICES):
    """The async run above as a run folder; devices=None leaves devices.csv out."""
    folder = write_run(folder, rounds=ASYNC_ROUNDS, events=ASYNC_EVENTS, seed=seed, name=name)
    (folder / "scenario.resolved.yaml").write_text(ASYNC_SCENARIO.format(name=name, seed=seed, algorithm="fedavg"))
    if devices is not None:
        (folder / "devices.csv").write_text(devices)
    return folder


@pytest.fixture
def async_run_dir(tmp_path):
    return write_async_run(tmp_path / "runs" / "tiny-async" / "0")


@pytest.fixture
def make_async_run():
    return write_async_run


@pytest.fixture
def async_rounds():
    return pd.read_csv(io.StringIO(ASYNC_ROUNDS))


@pytest.fixture
def async_events():
    return pd.read_csv(io.StringIO(ASYNC_EVENTS))
