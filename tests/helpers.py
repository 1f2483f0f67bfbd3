"""Shared by the tests: a two-device scenario with hand-computable timelines, and a way to simulate it."""
import copy
from pathlib import Path

import torch
import yaml

from testbed import scenario as sc
from testbed.engine import Engine

ROOT = Path(__file__).resolve().parent.parent

# Two devices whose timelines are easy to compute by hand (see test_engine.py).
TWO_DEVICES = {
    "name": "two_devices",
    "seed": 0,
    "data": {"name": "mnist5k", "partition": {"kind": "iid"}},
    "model": {"name": "cnn_fedlps"},
    "fleet": {"groups": [
        {"profile": "raspberry_pi_4", "count": 1, "peak_flops": 5.766e9, "efficiency": 1.0,
         "down_Bps": 87360, "up_Bps": 43680, "latency_s": 0.25},
        {"profile": "raspberry_pi_4", "count": 1, "peak_flops": 2.883e9, "efficiency": 1.0,
         "down_Bps": 174720, "up_Bps": 174720, "latency_s": 0.5},
    ]},
    "round": {"clients_per_round": 2},
    "client": {"lr": 0.05, "local_epochs": 1, "batch_size": 200},
    "algorithm": {"name": "fedavg"},
    "stop": {"max_rounds": 2},
}


def simulate(raw: dict, base_dir: Path = ROOT, *, check_builtins: bool = False):
    """Run a scenario dict through the engine; return (round records, event rows). check_builtins: hold the
    built-in plugins to their contracts too (testbed/contracts.py)."""
    records, events = [], []
    exp = sc.build(sc.validate(raw, "test", base_dir), check_builtins=check_builtins)
    Engine(exp, lambda rec, ev: (records.append(rec), events.extend(ev))).run()
    return records, events


def write_yaml(path: Path, raw: dict) -> Path:
    path.write_text(yaml.safe_dump(raw))
    return path


# A tiny 3-class data set of 6 features (logreg has 21 entries): fast end-to-end runs of any algorithm. Register
# it with monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs).
TINY_FEATURES, TINY_CLASSES = 6, 3


def tiny_blobs():
    from testbed.data import Dataset

    g = torch.Generator().manual_seed(0)

    def make(n):
        y = torch.arange(n) % TINY_CLASSES
        x = 0.5 * torch.randn(n, TINY_FEATURES, generator=g)
        x[torch.arange(n), y] += 2.0
        return x, y

    (x, y), (tx, ty) = make(60), make(30)
    return Dataset("tiny_blobs", x, y, tx, ty, num_classes=TINY_CLASSES)


def tiny_scenario(algorithm: dict, executor: str = "serial", client: dict | None = None, rounds: int = 2,
                  codec: dict | None = None) -> dict:
    """TWO_DEVICES on tiny_blobs with logreg and 3 local steps: an algorithm end to end in well under a second."""
    raw = {**copy.deepcopy(TWO_DEVICES), "name": "tiny", "data": {"name": "tiny_blobs", "partition": {"kind": "iid"}},
           "model": {"name": "logreg"}, "algorithm": algorithm, "executor": {"kind": executor},
           "client": client or {"lr": 0.01, "batch_size": 10, "local_steps": 3}, "stop": {"max_rounds": rounds}}
    return raw | ({"codec": codec} if codec else {})


def run_recorded(raw: dict, recording):
    """Run a scenario with its strategy wrapped by `recording` (a class taking the strategy); returns the rounds
    and events as DataFrames and the recording."""
    import pandas as pd

    exp = sc.build(sc.validate(raw, "test"))
    exp.strategy = recorder = recording(exp.strategy)
    records, events = [], []
    Engine(exp, lambda record, rows: (records.append(record), events.extend(rows))).run()
    return pd.DataFrame(records), recorder, pd.DataFrame(events)


def run_killed_after(raw: dict, out, round_: int) -> None:
    """Run a scenario through run_scenario and die right after round `round_`'s rows are written, as a kill would
    (no summary, no final checkpoint): what --resume then goes on from."""
    import pytest

    from testbed.runlog import RunWriter
    from testbed.runner import run_scenario

    write_round = RunWriter.round

    def round_then_die(self, record, events):
        write_round(self, record, events)
        if record["round"] == round_:
            raise SystemExit("killed")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RunWriter, "round", round_then_die)
        with pytest.raises(SystemExit):
            run_scenario(sc.validate(raw, "test"), "test", out, quiet=True)


def user_module(folder: Path, monkeypatch, source: str, name: str = "user_code"):
    """Generator for a fixture: `name`.py holding `source` in `folder`, made the current directory and importable
    as a user's module is when they run from its folder (a fresh import: this test's file, not an earlier
    test's); yields the folder and forgets the module after the test."""
    import sys

    (folder / f"{name}.py").write_text(source)
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)
    yield folder
    sys.modules.pop(name, None)


def printed_table(text: str, key: str) -> list[dict]:
    """The first table in `text` whose header starts with the column `key`, read back from what `testbed run` or
    `report` printed: a wide table comes in blocks of columns, each led by `key` (analysis.terminal.fit_table),
    merged here into one dict per row, its cells split at spaces."""
    lines, rows = text.splitlines(), []
    i = next(n for n, line in enumerate(lines) if line.split()[:1] == [key])
    while i < len(lines) and lines[i].split()[:1] == [key]:
        header, i, block = lines[i].split(), i + 1, []
        while i < len(lines) and lines[i].strip():
            block.append(dict(zip(header, lines[i].split())))
            i += 1
        rows = [{**row, **cells} for row, cells in zip(rows, block)] if rows else block
        while i < len(lines) and not lines[i].strip():  # the blank line between blocks
            i += 1
    return rows
