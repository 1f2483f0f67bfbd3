"""Plugins that break their interface (testbed/contracts.py), each a small user module as a user writes one: the
command line says which plugin broke which rule in one line and exits 2, the rounds already written kept; the
Python API raises PluginError with that line, the plugin's own exception chained; a plugin that hands out no
task makes its rounds degenerate, named."""
import json

import pytest
from helpers import user_module, write_yaml
from test_plugins import FOUR_BOARDS
from test_plugins import USER_MODULE as PLUGINS_MODULE   # its loader and model, and more

import testbed
from testbed.cli import main
from testbed.errors import PluginError, TestbedError

USER_MODULE = PLUGINS_MODULE + '''
from dataclasses import replace

from testbed.algorithms.base import Result
from testbed.selection import Selector


@dataclass(frozen=True)
class WrongShape(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        new, metrics = super().aggregate(state, round, arrivals, failures)
        return replace(new, params={n: p[:1] if p.ndim == 2 else p for n, p in new.params.items()}), metrics


@dataclass(frozen=True)
class MissingTensor(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        new, metrics = super().aggregate(state, round, arrivals, failures)
        return replace(new, params={n: p for n, p in new.params.items() if not n.endswith("bias")}), metrics


@dataclass(frozen=True)
class OnlyState(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        return super().aggregate(state, round, arrivals, failures)[0]


@dataclass(frozen=True)
class StringMetric(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        new, metrics = super().aggregate(state, round, arrivals, failures)
        return new, metrics | {"train_loss": "low"}


@dataclass(frozen=True)
class SecondRoundBreaks(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        new, metrics = super().aggregate(state, round, arrivals, failures)
        return (new if round == 1 else None), metrics


@dataclass(frozen=True)
class Idle(FedAvg):
    ASYNC = frozenset({"buffered"})   # the cloud of hierarchical aggregation can take its edges' deltas

    def configure(self, state, ctx, rng):
        return []


@dataclass(frozen=True)
class HalfUpdate(FedAvg):
    def finish(self, task, trained, received, stats, opt_state):
        result = super().finish(task, trained, received, stats, opt_state)
        return Result({n: u for n, u in result.update.items() if n.endswith("weight")}, result.metrics)


@dataclass(frozen=True)
class Raises(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        raise RuntimeError("the server fell over")


@dataclass(frozen=True)
class NoSamples(FedAvg):
    def configure(self, state, ctx, rng):
        return [replace(task, samples_processed=0) for task in super().configure(state, ctx, rng)]


@dataclass(frozen=True)
class NegativeSamples(FedAvg):
    def configure(self, state, ctx, rng):
        return [replace(task, num_samples=-5) for task in super().configure(state, ctx, rng)]


@dataclass(frozen=True)
class OnMeta(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        new, metrics = super().aggregate(state, round, arrivals, failures)
        return replace(new, params={n: p.to("meta") for n, p in new.params.items()}), metrics


@dataclass(frozen=True)
class Sparse(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        new, metrics = super().aggregate(state, round, arrivals, failures)
        return replace(new, params={n: p.to_sparse() for n, p in new.params.items()}), metrics


@dataclass(frozen=True)
class OwnsRounds(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        new, metrics = super().aggregate(state, round, arrivals, failures)
        return new, metrics | {"tables": {"rounds.csv": [{"round": round}]}}


@dataclass(frozen=True)
class TablesList(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        new, metrics = super().aggregate(state, round, arrivals, failures)
        return new, metrics | {"tables": [{"round": round}]}


@dataclass(frozen=True)
class NanFlops(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        new, metrics = super().aggregate(state, round, arrivals, failures)
        return new, metrics | {"server_flops": float("nan")}


@dataclass(frozen=True)
class NanMetric(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        new, metrics = super().aggregate(state, round, arrivals, failures)
        return new, metrics | {"spread": float("nan")}


@dataclass(frozen=True)
class ClaimsAccuracy(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        new, metrics = super().aggregate(state, round, arrivals, failures)
        return new, metrics | {"accuracy": 0.99}


@dataclass(frozen=True)
class Spread(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        new, metrics = super().aggregate(state, round, arrivals, failures)
        return new, metrics | {"spread": round / 4, "kept": len(arrivals)}


@dataclass(frozen=True)
class AppendsToRounds(FedAvg):
    def aggregate(self, state, round, arrivals, failures):
        import pathlib
        if round == 2:   # after round 1's rows were written
            with open(pathlib.Path(__file__).parent / "runs" / "contracts" / "0" / "rounds.csv", "a") as table:
                table.write("a torn line of my own")
        return super().aggregate(state, round, arrivals, failures)


def narrow(sample_shape, num_classes, width):
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(math.prod(sample_shape), num_classes - 1))


def wide(sample_shape, num_classes, width):
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(math.prod(sample_shape), num_classes + 2))


def mnist_sized(sample_shape, num_classes, width):
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, num_classes))


def doubles(sample_shape, num_classes, width):
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(math.prod(sample_shape), num_classes)).double()


def unbounded(sample_shape, num_classes, width):
    layer = torch.nn.Linear(math.prod(sample_shape), num_classes)
    torch.nn.init.constant_(layer.weight, float("inf"))
    return torch.nn.Sequential(torch.nn.Flatten(), layer)


@dataclass(frozen=True)
class PastTheFleet(Selector):
    def select(self, state, ctx, rng):
        return np.array([10_000]), state


@dataclass(frozen=True)
class Offline(Selector):
    def select(self, state, ctx, rng):
        usable = ctx.usable_each(np.arange(ctx.registry.n))
        return np.flatnonzero(~usable)[:1], state


@dataclass(frozen=True)
class Twice(Selector):
    def select(self, state, ctx, rng):
        return np.array([ctx.candidates[0], ctx.candidates[0]]), state


@dataclass(frozen=True)
class TooMany(Selector):
    def select(self, state, ctx, rng):
        return ctx.candidates[: ctx.n_select + 1], state


@dataclass(frozen=True)
class Nobody(Selector):
    def select(self, state, ctx, rng):
        return np.zeros(0, dtype=np.int64), state

'''

SCENARIO = FOUR_BOARDS | {   # test_plugins.py's, on eight devices: four of them come and go, two trained a round
    "name": "contracts",
    "fleet": {"groups": [{"profile": "raspberry_pi_4", "count": 4},
                         {"profile": "jetson_nano", "count": 4,
                          "availability": {"kind": "markov", "mean_on_s": 20, "mean_off_s": 200}}]},
    "round": {"clients_per_round": 2}, "stop": {"max_rounds": 3}}


@pytest.fixture
def user_code(tmp_path, monkeypatch):
    yield from user_module(tmp_path, monkeypatch, USER_MODULE)


def line_of(text: str) -> int:
    """The line of user_code.py that starts with `text` (stripped)."""
    return next(i for i, line in enumerate(USER_MODULE.splitlines(), 1) if line.strip().startswith(text))


def cli(folder, *sets, code=2):
    """Run SCENARIO with these --set overrides; the one line it printed (exit code `code`)."""
    folder.mkdir(exist_ok=True)
    file = write_yaml(folder / "s.yaml", SCENARIO)
    assert main(["run", str(file), "--out", str(folder / "runs"), "--quiet",
                 *[a for s in sets for a in ("--set", s)]]) == code
    return file


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "internal error" not in err, err
    return err


BROKEN = {   # setting -> what the one line says (after "error: ")
    "wrong-shaped aggregate": (
        "algorithm.name=user_code:WrongShape",
        "round 1: algorithm 'user_code:WrongShape'.aggregate ({file}:{WrongShape}) returned a state whose params do "
        "not fit the model: 1.weight has shape (1, 16), the model's is (3, 16); return a ServerState whose params "
        "are the model's, name for name (docs/extending.md)"),
    "a missing tensor": (
        "algorithm.name=user_code:MissingTensor",
        "round 1: algorithm 'user_code:MissingTensor'.aggregate ({file}:{MissingTensor}) returned a state whose "
        "params do not fit the model: 1.bias missing"),
    "only the state": (
        "algorithm.name=user_code:OnlyState",
        "round 1: algorithm 'user_code:OnlyState'.aggregate ({file}:{OnlyState}) returned ServerState where "
        "(state, metrics) was due; return the pair (ServerState, dict of metrics)"),
    "a string metric": (
        "algorithm.name=user_code:StringMetric",
        "round 1: algorithm 'user_code:StringMetric'.aggregate ({file}:{StringMetric}) returned metric "
        "'train_loss' = 'low' (str), not a number; return metrics as a dict of name -> number"),
    "an update without its biases": (
        "algorithm.name=user_code:HalfUpdate",
        "round 1: algorithm 'user_code:HalfUpdate'.finish ({file}:{HalfUpdate}) returned an update of device"),
    "fewer logits than classes": (
        "model.name=user_code:narrow",
        "model 'user_code:narrow' ({file}:{narrow}) made a model that gives 2 logits a sample where the data has 3 "
        "classes (output (2, 2) for a batch of 2); make its last layer give num_classes (3) outputs"),
    "more logits than classes": (
        "model.name=user_code:wide",
        "model 'user_code:wide' ({file}:{wide}) made a model that gives 5 logits a sample where the data has 3 "
        "classes"),
    "a task of no samples": (
        "algorithm.name=user_code:NoSamples",
        "round 1: algorithm 'user_code:NoSamples'.configure ({file}:{NoSamples}) returned device "),
    "a task of negative samples": (
        "algorithm.name=user_code:NegativeSamples",
        "'s task with num_samples = -5, not a positive integer; build tasks with task_for(d, ctx, ...)"),
    "a model on another device": (
        "algorithm.name=user_code:OnMeta",
        "round 1: algorithm 'user_code:OnMeta'.aggregate ({file}:{OnMeta}) returned a state whose params do not "
        "fit the model: 1.weight is on meta, the server's tensors are on cpu"),
    "a sparse model": (
        "algorithm.name=user_code:Sparse",
        "round 1: algorithm 'user_code:Sparse'.aggregate ({file}:{Sparse}) returned a state whose params do not fit "
        "the model: 1.weight is a sparse_coo tensor, the model's are dense (strided)"),
    "a table named like the run's own": (
        "algorithm.name=user_code:OwnsRounds",
        "round 1: algorithm 'user_code:OwnsRounds'.aggregate ({file}:{OwnsRounds}) returned metrics['tables'] naming "
        "'rounds.csv', a run's own file"),
    "tables given as a list": (
        "algorithm.name=user_code:TablesList",
        "returned metrics['tables'] of type list, not a dict of file name -> rows"),
    "a NaN count of server FLOPs": (
        "algorithm.name=user_code:NanFlops",
        "returned metric 'server_flops' = nan, not a finite number"),
    "a NaN metric": (
        "algorithm.name=user_code:NanMetric",
        "returned metric 'spread' = nan, not a finite number"),
    "a metric named like rounds.csv's column": (
        "algorithm.name=user_code:ClaimsAccuracy",
        "returned a metric named 'accuracy', which is rounds.csv's own column; name it otherwise"),
    "layers that do not fit the data": (
        "model.name=user_code:mnist_sized",
        "model 'user_code:mnist_sized' ({file}:{mnist_sized}) made a model that cannot take the data: on a batch of "
        "shape (2, 1, 4, 4) (float32) its forward pass raised RuntimeError: mat1 and mat2 shapes cannot be multiplied "
        "(2x16 and 784x3); make it take samples of shape (1, 4, 4)"),
    "float64 parameters": (
        "model.name=user_code:doubles",
        "model 'user_code:doubles' ({file}:{doubles}) made a model with float64 parameters where the testbed trains "
        "float32; build it in float32"),
    "logits that are not finite": (
        "model.name=user_code:unbounded",
        "model 'user_code:unbounded' ({file}:{unbounded}) made a model whose output on a batch of the data is not "
        "finite"),
    "a selector's id past the fleet": (
        "selection.name=user_code:PastTheFleet",
        "round 1: selection 'user_code:PastTheFleet'.select ({file}:{PastTheFleet}) returned device 10000, "
        "outside the fleet of 8 (ids 0..7); return ids among ctx.candidates"),
    "a selector picking offline devices": (
        "selection.name=user_code:Offline",
        "round 1: selection 'user_code:Offline'.select ({file}:{Offline}) returned device 4, which cannot take a "
        "task at 0 s (offline, busy, or kept out by memory or battery)"),
    "a selector picking a device twice": (
        "selection.name=user_code:Twice",
        "round 1: selection: 'user_code:Twice' picked 2 devices (1 distinct) where 2 distinct were asked for; fix "
        "its select ({file}:{Twice}): return distinct ids, at most ctx.n_select"),
    "a selector picking too many": (
        "selection.name=user_code:TooMany",
        "round 1: selection: 'user_code:TooMany' picked 3 devices (3 distinct) where 2 distinct were asked for; "
        "fix its select ({file}:{TooMany})"),
}
HOOKS = {"WrongShape": "def aggregate", "MissingTensor": "def aggregate", "OnlyState": "def aggregate",
         "StringMetric": "def aggregate", "HalfUpdate": "def finish", "narrow": "def narrow", "wide": "def wide",
         "mnist_sized": "def mnist_sized", "NoSamples": "def configure",
         "NegativeSamples": "def configure", "OwnsRounds": "def aggregate",
         "TablesList": "def aggregate", "NanFlops": "def aggregate", "NanMetric": "def aggregate",
         "ClaimsAccuracy": "def aggregate", "OnMeta": "def aggregate", "Sparse": "def aggregate", "doubles": "def doubles", "unbounded": "def unbounded",
         "PastTheFleet": "def select", "Offline": "def select", "Twice": "def select", "TooMany": "def select",
         "Nobody": "def select", "Idle": "def configure"}


def hook_line(owner: str) -> int:
    """The line of `owner`'s hook in USER_MODULE: its def (a class's first such def after the class line)."""
    lines = USER_MODULE.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith((f"class {owner}(", f"def {owner}(")))
    return next(i for i, line in enumerate(lines[start:], start + 1) if line.strip().startswith(HOOKS[owner]))


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_contract_is_one_line_naming_the_plugin_and_exit_2(case, user_code, capsys):
    setting, expected = BROKEN[case]
    cli(user_code, setting)
    err = one_line(capsys)
    expected = expected.format(file=user_code / "user_code.py", **{o: hook_line(o) for o in HOOKS})
    assert expected in err, err


def test_rounds_written_before_the_broken_one_are_kept(user_code, capsys):
    cli(user_code, "algorithm.name=user_code:SecondRoundBreaks")
    run = user_code / "runs" / "contracts" / "0"
    err = one_line(capsys)
    assert err.startswith("error: round 2: algorithm 'user_code:SecondRoundBreaks'.aggregate") and \
        err.endswith("(rounds so far kept in runs/contracts/0)\n")   # under the current folder: relative
    assert (run / "rounds.csv").read_text().count("\n") == 2   # the header and round 1
    assert json.loads((run / "summary.json").read_text())["status"].startswith("failed: round 2: ")


def test_a_configure_that_hands_out_no_task_makes_degenerate_rounds_naming_it(user_code, capsys):
    cli(user_code, "algorithm.name=user_code:Idle", code=0)
    summary = json.loads((user_code / "runs" / "contracts" / "0" / "summary.json").read_text())
    named = f"algorithm 'user_code:Idle'.configure ({user_code / 'user_code.py'}:{hook_line('Idle')})"
    assert summary["degenerate_rounds"] == {"rounds_without_tasks": 3} and summary["no_task_from"] == [named]
    assert summary["status"] == "completed"
    err = capsys.readouterr().err
    assert err == (f"warning: 3 rounds, of which 3 where no task was handed out ({named} gave none) "
                   "(summary.json: degenerate_rounds)\n")


def test_a_selector_that_picks_nobody_makes_degenerate_rounds_naming_it(user_code, capsys):
    cli(user_code, "selection.name=user_code:Nobody", code=0)
    summary = json.loads((user_code / "runs" / "contracts" / "0" / "summary.json").read_text())
    assert summary["degenerate_rounds"] == {"rounds_without_tasks": 3}
    assert summary["no_task_from"] == [f"selection 'user_code:Nobody'.select ({user_code / 'user_code.py'}:"
                                       f"{hook_line('Nobody')})"]


def test_the_api_raises_plugin_error_with_the_cli_line_and_the_cause_chained(user_code, capsys):
    with pytest.raises(PluginError) as raised:
        testbed.run(SCENARIO, set={"algorithm.name": "user_code:Raises"}, out=user_code / "runs", quiet=True)
    err = raised.value
    assert isinstance(err, TestbedError) and isinstance(err.__cause__, RuntimeError)
    run = user_code / "runs" / "contracts" / "0"
    line = line_of('raise RuntimeError("the server fell over")')
    assert str(err) == (f"the plugin code at {user_code / 'user_code.py'}:{line} in aggregate raised RuntimeError: "
                        "the server fell over; fix it there (traceback in runs/contracts/0/error.log; --debug "
                        "shows it here)")   # the run folder as the user reads it: relative to the current one
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == f"failed: {err}" and (run / "error.log").is_file()
    cli(user_code / "cli", "algorithm.name=user_code:Raises")   # the same line on the command line, exit 2
    assert one_line(capsys) == f"error: {str(err).replace('in runs/', 'in cli/runs/')}\n"


def test_the_api_raises_plugin_error_for_a_broken_contract(user_code):
    with pytest.raises(PluginError, match=r"round 1: algorithm 'user_code:OnlyState'.aggregate .* \(rounds so far "
                       r"kept in .*runs/contracts/0\)$"):
        testbed.run(SCENARIO, set={"algorithm.name": "user_code:OnlyState"}, out=user_code / "runs", quiet=True)
    with pytest.raises(PluginError, match="model 'user_code:narrow'"):
        testbed.run(SCENARIO, set={"model.name": "user_code:narrow"}, out=user_code / "runs", quiet=True,
                    overwrite=True)


def test_debug_shows_the_plugins_own_exception(user_code):
    file = write_yaml(user_code / "s.yaml", SCENARIO)
    with pytest.raises(RuntimeError, match="the server fell over"):
        main(["run", str(file), "--out", str(user_code / "runs"), "--quiet", "--set",
              "algorithm.name=user_code:Raises", "--debug"])


def test_an_asynchronous_selector_that_picks_nobody_is_refused_not_left_waiting(user_code, capsys):
    file = write_yaml(user_code / "s.yaml", SCENARIO | {"protocol": {"kind": "async", "concurrency": 2,
                                                                     "buffer_size": 1}})
    assert main(["run", str(file), "--out", str(user_code / "runs"), "--quiet", "--set",
                 "selection.name=user_code:Nobody"]) == 2
    err = one_line(capsys)
    assert "round 1: selection 'user_code:Nobody'.select" in err
    assert "returned no device for an asynchronous dispatch while some could take a task" in err


def test_hierarchical_rounds_without_tasks_are_degenerate_rounds_too(user_code, capsys):
    """Issue 45: an edge round's configure that hands out nothing was not counted (degenerate.py read sync only)."""
    cells = "[{name: a, down_Bps: 1e9, up_Bps: 1e9, groups: [0], backhaul: {down_Bps: 1e7, up_Bps: 1e7}}, " \
            "{name: b, down_Bps: 1e9, up_Bps: 1e9, groups: [1], backhaul: {down_Bps: 1e7, up_Bps: 1e7}}]"
    cli(user_code, "algorithm.name=user_code:Idle", "protocol={kind: hierarchical, edge_rounds: 2}",
        f"network={{cells: {cells}}}", code=0)
    summary = json.loads((user_code / "runs" / "contracts" / "0" / "summary.json").read_text())
    named = f"algorithm 'user_code:Idle'.configure ({user_code / 'user_code.py'}:{hook_line('Idle')})"
    assert summary["degenerate_rounds"] == {"rounds_without_tasks": 3} and summary["no_task_from"] == [named]
    assert "3 where no task was handed out" in capsys.readouterr().err


def test_a_plugin_table_never_replaces_the_runs_own(user_code, capsys):
    """Issue 45: metrics['tables'] = {'rounds.csv': rows} had overwritten rounds.csv before the run crashed."""
    cli(user_code, "algorithm.name=user_code:OwnsRounds")
    rounds = (user_code / "runs" / "contracts" / "0" / "rounds.csv").read_text().splitlines()
    assert rounds[0].startswith("round,t_start_s,") and len(rounds) == 1   # the header: round 1 was refused
    assert "a run's own file" in one_line(capsys)


def test_a_strategys_own_metrics_are_recorded_in_metrics_csv(user_code):
    """Issue 45: metrics besides train_loss and server_flops were recorded nowhere; metrics.csv holds them, a row a
    metric and round, in the order the strategy gave them."""
    import pandas as pd

    cli(user_code, "algorithm.name=user_code:Spread", code=0)
    run = user_code / "runs" / "contracts" / "0"
    table = pd.read_csv(run / "metrics.csv")
    arrived = pd.read_csv(run / "rounds.csv")["arrived"].tolist()
    assert table.to_dict("records") == [row for r in (1, 2, 3) for row in (
        {"round": r, "metric": "spread", "value": r / 4}, {"round": r, "metric": "kept", "value": arrived[r - 1]})]


def test_a_plugin_that_writes_into_rounds_csv_fails_the_run_and_leaves_whole_rows(user_code, capsys):
    """Issue 45: a plugin appending to rounds.csv mid-round left a torn line and a run marked completed."""
    import pandas as pd

    cli(user_code, "algorithm.name=user_code:AppendsToRounds")
    run = user_code / "runs" / "contracts" / "0"
    err = one_line(capsys)
    assert "rounds.csv: another writer changed it during the run" in err and "metrics['tables']" in err
    assert "torn" not in (run / "rounds.csv").read_text() and len(pd.read_csv(run / "rounds.csv")) == 1
    assert json.loads((run / "summary.json").read_text())["status"].startswith("failed: ")
