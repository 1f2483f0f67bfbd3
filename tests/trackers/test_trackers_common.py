"""testbed.trackers without any tracker library: the specs' checks, the metrics made of a row, the flattening, and
what Trackers does when a backend fails (a fake backend stands in)."""
import subprocess
import sys

import pytest
from tracker_cases import EXPECTED, FLAT, NEVER, PARAMS, ROWS, SUMMARY, play, tracked_run

from testbed import trackers
from testbed.errors import TestbedError
from testbed.trackers import Trackers, check, metrics
from testbed.trackers.base import Tracker, flat, split_summary
from testbed.trackers.places import Place


def one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


def test_check_passes_the_specs_through():
    assert check(["tensorboard", "mlflow=sqlite:///x.db", "wandb=proj"]) == [
        "tensorboard", "mlflow=sqlite:///x.db", "wandb=proj"]
    assert check([]) == []


@pytest.mark.parametrize("spec, words", [
    ("neptune", ["--track neptune: unknown tracker", "tensorboard, mlflow or wandb"]),
    ("mlflow=", ["--track mlflow=: empty target", "--track mlflow=TRACKING_URI"]),
])
def test_check_refuses_a_bad_spec_in_one_line(spec, words):
    with pytest.raises(TestbedError) as err:
        check([spec])
    assert all(w in one_line(err) for w in words)


def test_check_refuses_a_tracker_given_twice():
    with pytest.raises(TestbedError) as err:
        check(["tensorboard", "tensorboard=logs"])
    assert "--track tensorboard is given twice" in one_line(err)


@pytest.mark.parametrize("name, library", [("tensorboard", "tensorboard"), ("mlflow", "mlflow"), ("wandb", "wandb")])
def test_a_missing_library_is_named_with_its_extra(monkeypatch, name, library):
    monkeypatch.setitem(sys.modules, library, None)  # import and find_spec both fail, as where it is not installed
    with pytest.raises(TestbedError) as err:
        check([f"{name}=x"])
    assert one_line(err) == f'--track {name}: {library} is not installed; pip install -e ".[{name}]"'


def test_importing_trackers_imports_no_tracker_library():
    code = ("import sys, testbed.trackers, testbed.trackers.base; "
            "print(sorted(m for m in ('tensorboard', 'mlflow', 'wandb', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_metrics_skip_nans_rename_t_end_and_total_bytes_flops_energy():
    totals, logged = {}, {}
    for row in ROWS:
        for key, value in metrics(row, totals).items():
            logged.setdefault(key, []).append((row["round"], value))
    for key, series in EXPECTED.items():
        assert logged[key] == series, key
    assert not NEVER & set(logged)


def test_earlier_rows_carry_the_totals_of_a_resumed_run(tmp_path, fake):
    t = Trackers(["fake"], tracked_run(tmp_path))
    t.start(earlier_rows=ROWS[:2])
    t.log(ROWS[2])
    (_, step, values), = [c for c in fake.calls if c[0] == "log"]
    assert (step, values["bytes_up_total"], values["flops_total"]) == (3, 250.0, 3000.0)


def test_flat_keys_are_dotted_lists_of_dicts_by_index_nulls_left_out():
    assert flat(PARAMS) == FLAT
    numbers, texts = split_summary(SUMMARY)
    assert numbers == {"seed": 0.0, "final_accuracy": 0.75, "best_accuracy": 0.75, "sim_time_s": 4.0,
                       "bytes_up_total": 250.0, "time_to_accuracy_s.0.5": 1.5}
    assert texts == {"scenario": "quickstart", "status": "completed"}


class Fake(Tracker):
    """A backend that records its calls in `calls` and raises where `fail` says: {"start": spec, "log": round}."""
    calls: list = []
    fail: dict = {}

    def start(self):
        self.calls.append(("start", self.spec))
        if self.fail.get("start") == self.spec:
            raise ConnectionError("refused\nsecond line")

    def log(self, step, values):
        if self.fail.get("log") == (self.spec, step):
            raise RuntimeError("disk full")
        self.calls.append(("log", step, values))

    def finish(self, summary, files):
        self.calls.append(("finish", self.spec, [f.name for f in files]))

    def close(self, status):
        self.calls.append(("close", self.spec, status))

    def place(self):
        return Place(self.spec, f"logging into {self.spec}/", f"kept in {self.spec}/")


@pytest.fixture
def fake(monkeypatch):
    """Backends "fake" and "other", both a Fake, installed as if they were libraries."""
    Fake.calls, Fake.fail = [], {}
    module = type(sys)("fake_tracker_backend")
    module.Fake = Fake
    monkeypatch.setitem(sys.modules, "fake_tracker_backend", module)
    for name in ("fake", "other"):
        monkeypatch.setitem(trackers.BACKENDS, name, ("fake_tracker_backend", "Fake", ()))
        monkeypatch.setitem(trackers.TARGETS, name, "X")
    return Fake


def test_a_tracker_that_raises_mid_run_warns_once_and_is_dropped(tmp_path, fake, capsys):
    fake.fail = {"log": ("fake", 2)}
    run = tracked_run(tmp_path)
    play(Trackers(["fake", "other"], run), run)
    err = capsys.readouterr().err
    assert err == ("--track fake: stopped at round 2 (RuntimeError: disk full); the run goes on, its folder keeps "
                   "everything\n")
    assert [c[:2] for c in fake.calls if c[0] == "log"] == [("log", 1), ("log", 1), ("log", 2), ("log", 3)]
    assert ("close", "fake", "failed: RuntimeError: disk full") in fake.calls  # marked failed where it can be
    assert fake.calls[-1] == ("finish", "other", ["a.png", "rounds.csv"])  # the other goes on to the end


def test_a_start_that_fails_closes_the_started_ones_and_says_so_in_one_line(tmp_path, fake):
    fake.fail = {"start": "other=x"}
    with pytest.raises(TestbedError) as err:
        Trackers(["fake", "other=x"], tracked_run(tmp_path)).start()
    assert one_line(err) == "--track other=x: could not start (ConnectionError: refused; second line); check the target"
    assert [c for c in fake.calls if c[0] == "close"] == [
        ("close", "fake", "failed: --track other=x could not start"),
        ("close", "other=x", "failed: --track other=x could not start")]


def test_close_never_raises(tmp_path, fake, capsys):
    t = Trackers(["fake"], tracked_run(tmp_path))
    t.start()
    t.live[0].close = lambda status: 1 / 0
    t.close("interrupted")
    assert capsys.readouterr().err.startswith("--track fake: stopped at closing (ZeroDivisionError")
    assert t.live == []


def test_each_started_tracker_says_where_at_the_start_and_again_at_the_end(tmp_path, fake, capsys):
    fake.fail = {"log": ("fake", 2)}   # dropped at round 2: what it kept of round 1 is still where it says
    lines, run = [], tracked_run(tmp_path)
    play(Trackers(["fake", "other"], run), run, say=lines.append)
    assert lines == ["fake: logging into fake/", "other: logging into other/", "fake: kept in fake/",
                     "other: kept in other/"]
    play(Trackers(["fake"], run), run)   # say=None: a quiet run says nothing
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("fail, end, said", [
    ({}, "interrupted", ["fake: logging into fake/", "fake: kept in fake/"]),   # a run stopped: its rounds so far
    ({"start": "fake"}, None, []),                                              # never started: nothing to say
])
def test_a_run_that_stops_says_where_its_rounds_are_one_that_never_started_nothing(tmp_path, fake, fail, end, said):
    fake.fail, lines = fail, []
    trackers = Trackers(["fake"], tracked_run(tmp_path))
    try:
        trackers.start(say=lines.append)
    except TestbedError:
        pass
    trackers.close(end or "failed: no start")
    assert lines == said
