"""The selection interface (testbed/selection/): a user's selector named from a scenario, what it is shown (the
registry, the history kept from what the server saw), what it is told after each round, its state through a
checkpoint, and the one-line errors of a bad one."""
import copy
import sys

import numpy as np
import pandas as pd
import pytest

import testbed.data
from helpers import TWO_DEVICES, run_killed_after, tiny_blobs, tiny_scenario, write_yaml
from selection_runs import older_checkpoint
from testbed import scenario as sc
from testbed.cli import main
from testbed.engine import Engine
from testbed.errors import TestbedError
from testbed.runner import run_scenario
from testbed.selection import History, Outcome

USER_SELECTORS = '''
from dataclasses import dataclass

import numpy as np

from testbed.selection import Selector


@dataclass(frozen=True)
class Fastest(Selector):
    """The candidates with the shortest predicted task time; its state records what it is told."""
    margin: float = 0.0

    def __post_init__(self):
        if self.margin < 0:
            raise ValueError("margin must be >= 0")

    def init(self, registry, rounds, clients_per_round):
        return {"told": []}

    def select(self, state, ctx, rng):
        order = np.argsort(ctx.registry.task_s[ctx.candidates], kind="stable")
        return ctx.candidates[order[:ctx.n_select]], state

    def observe(self, state, round, now, outcomes, history):
        told = [round, [(o.device, o.outcome) for o in outcomes], history.selected.tolist()]
        return {"told": state["told"] + [told]}


@dataclass(frozen=True)
class Fragile(Fastest):
    def __post_init__(self):
        raise RuntimeError("no GPU here")


@dataclass(frozen=True)
class Rotating(Selector):
    """Device `turn` mod n, then the next ones: its choice depends on its state alone."""
    start: int = 0

    def init(self, registry, rounds, clients_per_round):
        return {"turn": self.start}

    def select(self, state, ctx, rng):
        n = ctx.registry.n
        picks = [(state["turn"] + i) % n for i in range(ctx.n_select)]
        return np.array(picks), {"turn": state["turn"] + 1}


@dataclass(frozen=True)
class Twice(Selector):
    def select(self, state, ctx, rng):
        return np.array([ctx.candidates[0], ctx.candidates[0]]), state


@dataclass(frozen=True)
class SyncOnly(Fastest):
    ASYNC = False


class NoSelect(Selector):
    pass


class NotASelector:
    def select(self, state, ctx, rng):
        return [], state


@dataclass
class OldStyle(Selector):
    """Written for the older interface: select(ctx, rng), its state on itself."""
    turn: int = 0

    def select(self, ctx, rng):
        self.turn += 1
        return ctx.candidates[:ctx.n_select]


class OldObserve(Selector):
    def select(self, state, ctx, rng):
        return ctx.candidates[:ctx.n_select], state

    def observe(self, round, now, outcomes, history):
        pass


class OldRestore(OldObserve):
    def observe(self, state, round, now, outcomes, history):
        return state

    def restore(self, state):
        pass


class IdsOnly(Selector):
    def select(self, state, ctx, rng):
        return ctx.candidates[:ctx.n_select]


class Forgets(Rotating):
    def observe(self, state, round, now, outcomes, history):
        state["turn"] += 0   # and no return


class Memory:
    turn = 0


class Opaque(Rotating):
    def init(self, registry, rounds, clients_per_round):
        return {"memory": Memory()}

    def select(self, state, ctx, rng):
        return ctx.candidates[:ctx.n_select], state
'''


@pytest.fixture
def user_code(tmp_path, monkeypatch):
    (tmp_path / "my_selectors.py").write_text(USER_SELECTORS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_selectors", raising=False)
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)
    yield tmp_path
    sys.modules.pop("my_selectors", None)


def six_devices(selection: dict | None = None, rounds: int = 3) -> dict:
    """Three fast and three slow devices (TWO_DEVICES' two profiles, three each), two picked a round."""
    raw = tiny_scenario({"name": "fedavg"}, rounds=rounds)
    raw["fleet"] = {"groups": [g | {"count": 3} for g in copy.deepcopy(TWO_DEVICES["fleet"]["groups"])]}
    raw["round"] = {"clients_per_round": 2}
    return raw | ({"selection": selection} if selection else {})


def engine_run(raw):
    exp = sc.build(sc.validate(raw, "test"))
    records, events = [], []
    engine = Engine(exp, lambda r, e: (records.append(r), events.extend(e)))
    engine.run()
    return pd.DataFrame(records), pd.DataFrame(events), engine


def test_a_user_selector_picks_and_is_told_what_happened(user_code):
    rounds, events, engine = engine_run(six_devices({"name": "my_selectors:Fastest"}))
    told = engine.kit.participation.selector_state["told"]
    # the registry's predicted task time: device 1's group has half the FLOP/s, device 0's half the uplink; with
    # tiny_blobs (logreg) compute dominates, so the first group (ids 0-2) is faster and ids 0, 1 are picked
    chosen = events.groupby("round")["device"].apply(lambda d: sorted(set(d)))
    assert all(c == [0, 1] for c in chosen)
    assert [t[0] for t in told] == [1, 2, 3]
    assert told[0][1] == [(0, "arrived"), (1, "arrived")]
    assert told[-1][2] == [3, 3, 0, 0, 0, 0]  # the history was updated before it was told


def test_the_history_is_what_the_server_saw(user_code):
    rounds, events, engine = engine_run(six_devices({"name": "my_selectors:Fastest"}))
    h = engine.kit.participation.history
    assert h.checks == 3 and h.seen_online.tolist() == [3] * 6  # always on: seen at every round's start
    assert h.selected.tolist() == [3, 3, 0, 0, 0, 0] and h.arrived.tolist() == [3, 3, 0, 0, 0, 0]
    assert h.last_selected.tolist() == [3, 3, 0, 0, 0, 0]
    last = events[events["round"] == 3]
    for d in (0, 1):
        mine = last[last["device"] == d]
        assert h.duration_s[d] == pytest.approx(mine["end_s"].max() - mine["start_s"].min(), abs=1e-12)
    assert np.isnan(h.duration_s[2:]).all() and np.isnan(h.loss[2:]).all()
    assert np.isfinite(h.loss[:2]).all() and (h.loss_sq[:2] >= h.loss[:2] - 1e-12).all()  # RMS >= mean


def test_history_record_by_hand():
    h = History.empty(3)
    h.dispatched(np.array([0, 2]), 4)
    h.record([Outcome(0, 4, "arrived", 10.0, 12.5, {"train_loss": 3.0, "train_loss_sq": 4.0}),
              Outcome(2, 4, "dropped", 10.0, 11.0)])
    h.looked(np.array([True, False, True]), 20.0)
    h.looked(np.array([True, True, False]), 30.0)
    assert h.selected.tolist() == [1, 0, 1] and h.last_selected.tolist() == [4, 0, 4]
    assert h.arrived.tolist() == [1, 0, 0] and h.dropped.tolist() == [0, 0, 1]
    assert h.duration_s[0] == 2.5 and h.loss[0] == 3.0 and h.loss_sq[0] == 4.0 and h.loss_round[0] == 4
    assert h.seen_online.tolist() == [2, 1, 1] and h.checks == 2
    assert h.online_since_s[0] == 20.0 and h.online_since_s[1] == 30.0 and np.isnan(h.online_since_s[2])
    with pytest.raises(ValueError, match="unknown outcome 'late'"):
        h.record([Outcome(1, 5, "late", 0.0, 1.0)])


def test_uniform_named_is_the_default_to_the_byte(user_code):
    default = engine_run(six_devices())
    named = engine_run(six_devices({"name": "uniform"}))
    assert default[0].equals(named[0]) and default[1].equals(named[1])
    resolved = sc.validate(six_devices({"name": "uniform"}), "test").model_dump(mode="json")
    assert "selection" not in resolved  # the resolved scenario of a default run is as it was before selection


def test_options_reach_the_selector_and_a_user_selector_is_resolved_in_the_record(user_code):
    s = sc.validate(six_devices({"name": "my_selectors:Fastest", "options": {"margin": 0.5}}), "test")
    from testbed.validation import selector_of

    assert selector_of(s).margin == 0.5
    assert s.model_dump(mode="json")["selection"] == {"name": "my_selectors:Fastest", "options": {"margin": 0.5}}


def test_the_selectors_state_survives_a_resume(user_code):
    raw = six_devices({"name": "my_selectors:Rotating"}, rounds=6) | {"checkpoint": {"every_rounds": 2}}
    run_scenario(sc.validate(raw, "test"), "test", user_code / "unbroken", quiet=True)
    run_killed_after(raw, user_code / "broken", 3)  # checkpoint at 2; round 3 written
    run_scenario(sc.validate(raw, "test"), "test", user_code / "broken", quiet=True, resume=True)
    tables = [(f / "tiny" / "0" / name).read_bytes() for f in (user_code / "unbroken", user_code / "broken")
              for name in ("rounds.csv", "events.csv")]
    assert tables[:2] == tables[2:]
    devices = pd.read_csv(user_code / "broken" / "tiny" / "0" / "events.csv").groupby("round")["device"].min()
    assert devices.tolist() == [0, 1, 2, 3, 4, 0]  # the rotation went on from its checkpointed turn (round 6: 5, 0)


@pytest.mark.parametrize("selection, message", [
    ({"name": "my_selectors:NotASelector"}, "selection: 'my_selectors:NotASelector' is the class NotASelector, not a "
                                            "Selector; subclass testbed.selection.base.Selector"),
    ({"name": "my_selectors:NoSelect"}, "selection: 'my_selectors:NoSelect' does not define select(self, state, ctx, rng)"),
    ({"name": "my_selectors:Nope"}, "selection: 'my_selectors:Nope': my_selectors has no attribute 'Nope'; it has: Fastest"),
    ({"name": "oortt"}, "selection: unknown selector 'oortt'"),
    ({"name": "my_selectors:Fastest", "options": {"margn": 1}},
     "selection.options: margn is not an option of 'my_selectors:Fastest' (it takes: margin)"),
    ({"name": "my_selectors:Fastest", "options": {"margin": "wide"}},
     "selection.options.margin: Input should be a valid number"),
    ({"name": "my_selectors:Fastest", "options": {"margin": -1}},
     "selection.options: 'my_selectors:Fastest' refused its options (ValueError: margin must be >= 0)"),
    ({"name": "uniform", "option": {}}, "selection.option: unknown key"),
    ({"name": "my_selectors:OldStyle"}, "selection: 'my_selectors:OldStyle' is written for the older Selector "
                                        "interface (select(self, ctx, rng)), which kept state on the selector; port "
                                        "it to init(registry, rounds, clients_per_round) -> state, select(state, ctx, "
                                        "rng) -> (ids, state), observe(state, round, now, outcomes, history) -> state "
                                        "(docs/extending.md)"),
    ({"name": "my_selectors:OldObserve"}, "'my_selectors:OldObserve' is written for the older Selector interface "
                                          "(observe(self, round, now, outcomes, history))"),
    ({"name": "my_selectors:OldRestore"}, "'my_selectors:OldRestore' is written for the older Selector interface "
                                          "(restore())"),
])
def test_bad_selectors_end_in_one_line(selection, message, user_code, capsys):
    assert main(["validate", str(write_yaml(user_code / "s.yaml", six_devices(selection)))]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err, err


def test_the_schema_builds_no_selector_validation_asks_the_one_the_run_builds(user_code, capsys):
    """The `selection:` section is plain data: a value the constructor refuses passes the schema, which asks the
    class only; validation builds the selector as the composition root does (testbed/validation.py's
    selector_of) and refuses it in one line, and a constructor that crashes is named as the user's code."""
    from testbed.schema.scenario import Scenario

    raw = six_devices({"name": "my_selectors:Fastest", "options": {"margin": -1}})
    assert Scenario.model_validate(raw).selection.options == {"margin": -1}
    with pytest.raises(TestbedError, match="^test: selection.options: 'my_selectors:Fastest' refused its options"):
        sc.validate(raw, "test")
    assert main(["validate", str(write_yaml(user_code / "s.yaml", six_devices({"name": "my_selectors:Fragile"})))]) \
        == 2
    line = USER_SELECTORS.splitlines().index('        raise RuntimeError("no GPU here")') + 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: the plugin code at {user_code / 'my_selectors.py'}:{line} in __post_init__ "
                          "raised RuntimeError: no GPU here; fix it there"), err


def test_a_selector_that_picks_a_device_twice_is_stopped_in_one_line(user_code, capsys):
    file = write_yaml(user_code / "s.yaml", six_devices({"name": "my_selectors:Twice"}))
    assert main(["run", str(file), "--out", str(user_code / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "selection: 'my_selectors:Twice' picked 2 devices (1 distinct) where 2 distinct were asked for" in err
    assert "\n" not in err


def test_a_synchronous_only_selector_is_refused_under_async(user_code, capsys):
    raw = six_devices({"name": "my_selectors:SyncOnly"})
    raw["protocol"] = {"kind": "async", "concurrency": 2, "buffer_size": 2}
    assert main(["validate", str(write_yaml(user_code / "s.yaml", raw))]) == 2
    assert "selection: 'my_selectors:SyncOnly' picks a synchronous round's participants together" in \
        capsys.readouterr().err


def test_async_dispatch_asks_the_selector(user_code):
    raw = six_devices({"name": "my_selectors:Fastest"}, rounds=4)
    raw["protocol"] = {"kind": "async", "concurrency": 2, "buffer_size": 2}
    rounds, events, engine = engine_run(raw)
    assert set(events["device"]) == {0, 1}  # the two fastest, each time a slot frees up
    assert engine.kit.participation.history.selected[:2].sum() == len(events.drop_duplicates(["device", "task"]))


@pytest.mark.parametrize("name, message", [
    ("IdsOnly", ["round 1: selection 'my_selectors:IdsOnly'.select (", "returned ndarray where (ids, state) was due; "
                 "return the ids and the state, as select(state, ctx, rng) -> (ids, state) (docs/extending.md)"]),
    ("Forgets", ["round 1: selection 'my_selectors:Forgets'.observe (", "returned None where its state was due; "
                 "return the state it was given, or the next one (docs/extending.md)"]),
    ("Opaque", ["selection 'my_selectors:Opaque': its state holds a value of type Memory, which a checkpoint cannot "
                "keep; keep it as None, numbers, strings, numpy arrays, and lists, tuples and dicts of them "
                "(docs/extending.md)"]),
])
def test_a_selector_that_mishandles_its_state_is_stopped_in_one_line(name, message, user_code, capsys):
    """select's pair, the state observe must return, and a state a checkpoint can keep (plain data)."""
    raw = six_devices({"name": f"my_selectors:{name}"}) | {"checkpoint": {"every_rounds": 1}}
    assert main(["run", str(write_yaml(user_code / "s.yaml", raw)), "--out", str(user_code / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert all(part in err for part in message) and "\n" not in err, err


def test_an_older_testbeds_checkpoint_of_a_user_selector_is_refused_in_one_line(user_code, capsys):
    """A checkpoint that kept the selector's attributes (the older interface's state()) cannot be read into a
    user selector's state: resume says so and how to go on."""
    raw = six_devices({"name": "my_selectors:Rotating"}, rounds=4) | {"checkpoint": {"every_rounds": 2}}
    run_killed_after(raw, user_code / "broken", 3)
    older_checkpoint(user_code / "broken" / "tiny" / "0" / "checkpoint.pt", lambda state: {"start": 0, **state})
    file = write_yaml(user_code / "s.yaml", raw)
    assert main(["run", str(file), "--out", str(user_code / "broken"), "--quiet", "--resume"]) == 2
    resumed, error = capsys.readouterr().err.strip().split("\n")   # resume's note of the rows it dropped, then
    assert resumed.startswith("resume: ")                              # the error
    assert error.startswith("error: resume: the checkpoint was written by an older testbed's selector "
                            "('my_selectors:Rotating' kept its state on itself, which this testbed cannot read); run "
                            "without --resume to start over")

