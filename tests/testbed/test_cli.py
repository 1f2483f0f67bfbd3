"""The command line as a user meets it: bad input gets one line and exit code 2; runs write their folder."""
import importlib.util
import json

import pandas as pd
import pytest
import yaml
from helpers import ROOT, write_yaml

from testbed.cli import main
from testbed.scenario import load

NO_FLOWER = pytest.mark.skipif(importlib.util.find_spec("flwr") is None, reason="Flower (the flower extra) missing")
# Two rounds of these take 2 s or more each on 2 idle cores (a CNN, a big fleet or several edge rounds): they run in
# the slow target (`pytest -m slow`); test_quickstart_runs_shortened runs the quickstart in the default one.
LONG_TO_RUN = {"quickstart.yaml", "hierfavg.yaml", "fedadam_ssm.yaml", "shakespeare.yaml", "feddumap.yaml",
               "fedbuff.yaml", "fedprox_deadline.yaml", "har.yaml", "fedlion.yaml", "fadamgt.yaml", "digits.yaml",
               "flower_fedadam.yaml", "availability_fedadam_ssm.yaml", "availability_fedavg.yaml",
               "throttled_phones.yaml", "network_fedbuff.yaml", "heterogeneity.yaml", "energy.yaml", "synthetic.yaml",
               "network_cells.yaml", "fedadam_diurnal.yaml", "selection_heterogeneity.yaml"}
SCENARIOS = [pytest.param(p, marks=NO_FLOWER) if p.name.startswith("flower_") else p  # name: flower needs flwr
             for p in sorted((ROOT / "scenarios").rglob("*.yaml"))]  # the studies too


def _marked_long(param):
    path = param.values[0] if isinstance(param, type(pytest.param(None))) else param
    slow = path.name in LONG_TO_RUN or path.name.startswith("fedlps_mnist")   # nine variants of one scenario
    marks = [*getattr(param, "marks", ()), *([pytest.mark.slow] if slow else [])]
    return pytest.param(path, marks=marks)


def _bad(two_devices, mutate):
    raw = yaml.safe_load(yaml.safe_dump(two_devices))
    mutate(raw)
    return raw


BAD_INPUT = {
    "unknown key": (lambda r: r["round"].update(clients_per_rnd=3), "round.clients_per_rnd: unknown key"),
    "negative bandwidth": (lambda r: r["fleet"]["groups"][0].update(up_Bps=-5),
                           "fleet.groups.0.up_Bps: Input should be greater than 0"),
    "unknown algorithm": (lambda r: r["algorithm"].update(name="fedfoo"),
                          "algorithm.name: unknown 'fedfoo'; choose one of: 'fedavg', 'fedprox'"),
    "unknown dataset": (lambda r: r["data"].update(name="imagenet"),
                        "data.name: unknown dataset 'imagenet'; choose one of: cifar10, cifar100, digits, emnist"),
    "unknown device": (lambda r: r["fleet"]["groups"][0].update(profile="iphone99"),
                       "fleet.groups.0.profile: unknown device profile 'iphone99'; choose one of:"),
    "missing trace file": (lambda r: r["fleet"]["groups"][0].update(
        availability={"kind": "trace", "file": "nowhere.csv"}), "fleet.groups.0.availability.file: no trace file at"),
    "K larger than the fleet": (lambda r: r["round"].update(clients_per_round=3),
                                "round.clients_per_round: 3 is more than the fleet's 2 devices"),
    "missing section": (lambda r: r.pop("client"), "client: required; add it"),
    "wrong type": (lambda r: r["stop"].update(max_rounds="many"), "stop.max_rounds: Input should be a valid integer"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_scenarios_give_one_line_and_exit_2(case, two_devices, tmp_path, capsys):
    mutate, expected = BAD_INPUT[case]
    file = write_yaml(tmp_path / "bad.yaml", _bad(two_devices, mutate))
    for command in (["validate", str(file)], ["run", str(file), "--out", str(tmp_path / "runs"), "--quiet"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith(f"error: {file}: {expected}"), err
    assert not (tmp_path / "runs").exists()


def test_missing_scenario_file_and_bad_yaml(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.yaml")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nope.yaml'}: no such scenario file\n"
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nfleet: [unclosed\n")
    assert main(["validate", str(broken)]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_bad_override_and_report_of_a_missing_run(tmp_path, capsys):
    assert main(["validate", str(SCENARIOS[0]), "--set", "stop.max_rounds"]) == 2
    assert "expected KEY.PATH=VALUE" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "runs/x/0")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "runs/x/0" in err


def test_a_section_without_kind_tunes_the_default_kind(capsys):
    fedlps = ROOT / "scenarios/fedlps_mnist.yaml"
    ratio = load(fedlps, ["algorithm.ratio.exploration=ucbv"]).algorithm.ratio
    assert (ratio.kind, ratio.exploration, ratio.low, ratio.partitions) == ("pucbv", "ucbv", 0.5, 5)
    # keys of another kind still ask for the kind
    assert main(["validate", str(fedlps), "--set", "algorithm.ratio.ratio=0.3"]) == 2
    assert "algorithm.ratio.kind: missing; it selects the kind of this section" in capsys.readouterr().err


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_every_bundled_scenario_validates(scenario, capsys):
    assert main(["validate", str(scenario)]) == 0
    assert ": ok (" in capsys.readouterr().out


def test_quickstart_runs_shortened(tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["run", str(ROOT / "scenarios/quickstart.yaml"), "--out", str(out), "--quiet",
                 "--set", "stop.max_rounds=3"]) == 0
    run = out / "quickstart" / "0"
    printed = capsys.readouterr().out
    assert "time_s@0.9" in printed and str(run / "plots" / "accuracy_vs_time.png") in printed
    rounds = pd.read_csv(run / "rounds.csv")
    for column in ["round", "t_start_s", "t_end_s", "selected", "arrived", "dropped", "bytes_up", "bytes_down",
                   "flops", "accuracy", "loss"]:
        assert column in rounds
    assert list(rounds["round"]) == [1, 2, 3] and (rounds["t_end_s"] > rounds["t_start_s"]).all()
    assert (rounds["selected"] == 13).all() and (rounds["arrived"] <= 10).all()
    events = pd.read_csv(run / "events.csv")
    assert list(events.columns) == ["device", "round", "phase", "start_s", "end_s", "outcome", "ratio"]
    summary = json.loads((run / "summary.json").read_text())
    for key in ["final_accuracy", "time_to_accuracy_s", "bytes_up_total", "bytes_down_total", "flops_total",
                "sim_time_s"]:
        assert key in summary
    assert summary["bytes_up_total"] == rounds["bytes_up"].sum() and summary["status"] == "completed"
    resolved = yaml.safe_load((run / "scenario.resolved.yaml").read_text())
    assert resolved["stop"]["max_rounds"] == 3 and resolved["round"]["overcommit"] == 1.3
    for plot in ["accuracy_vs_time.png", "accuracy_vs_bytes_up.png", "gantt_quickstart_0.png"]:
        assert (run / "plots" / plot).read_bytes()[:4] == b"\x89PNG"
    devices = pd.read_csv(run / "devices.csv")
    assert len(devices) == 100 and devices["num_samples"].sum() == 4000


@pytest.mark.slow  # three CNN runs; the executors' and the sweeps' tests hold determinism in the default target
def test_same_scenario_and_seed_give_identical_tables(two_devices, tmp_path):
    two_devices["fleet"]["groups"][1]["availability"] = {"kind": "markov", "mean_on_s": 3, "mean_off_s": 1}
    two_devices["stop"] = {"max_rounds": 4}
    file = write_yaml(tmp_path / "s.yaml", two_devices)
    tables = []
    for attempt in ("a", "b"):
        assert main(["run", str(file), "--out", str(tmp_path / attempt), "--quiet"]) == 0
        run = tmp_path / attempt / "two_devices" / "0"
        tables.append(((run / "rounds.csv").read_bytes(), (run / "events.csv").read_bytes()))
    assert tables[0] == tables[1]
    assert main(["run", str(file), "--out", str(tmp_path / "c"), "--quiet", "--seed", "1"]) == 0
    assert (tmp_path / "c/two_devices/1/rounds.csv").read_bytes() != tables[0][0]


def test_diverging_run_keeps_its_rounds(two_devices, tmp_path, capsys):
    two_devices["client"]["lr"] = 1e6
    file = write_yaml(tmp_path / "s.yaml", two_devices)
    assert main(["run", str(file), "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "diverged" in err and "lower client.lr" in err
    run = tmp_path / "two_devices" / "0"
    assert len(pd.read_csv(run / "rounds.csv")) == 1
    assert json.loads((run / "summary.json").read_text())["status"].startswith("failed")


@pytest.mark.parametrize("scenario", [_marked_long(p) for p in SCENARIOS], ids=lambda p: p.name)
def test_every_bundled_scenario_runs_two_rounds(scenario, tmp_path):
    assert main(["run", str(scenario), "--out", str(tmp_path), "--quiet", "--set", "stop.max_rounds=2"]) == 0
    rounds = pd.read_csv(next(tmp_path.glob("*/0/rounds.csv")))
    assert len(rounds) == 2 and pd.notna(rounds["accuracy"].iloc[-1])  # the last round is always scored


@pytest.mark.slow
def test_quickstart_reaches_its_target(tmp_path):
    """The README's promise: the full quickstart reaches 0.9 test accuracy."""
    assert main(["run", str(ROOT / "scenarios/quickstart.yaml"), "--out", str(tmp_path), "--quiet"]) == 0
    summary = json.loads((tmp_path / "quickstart/0/summary.json").read_text())
    assert summary["time_to_accuracy_s"]["0.9"] is not None and summary["final_accuracy"] >= 0.9


BAD_DATA = {
    "on-disk without root": ({"name": "cifar10"}, "data: dataset 'cifar10' is read from disk; set data.root"),
    "missing data folder": ({"name": "cifar10", "root": "no/such/dir"}, "data.root: no folder at"),
    "root for bundled data": ({"name": "mnist5k", "root": "."}, "data: dataset 'mnist5k' ships with the testbed"),
    "unknown option": ({"name": "synthetic", "options": {"gamma": 1}},
                       "data.options: gamma is not an option of dataset 'synthetic' (it takes: alpha, beta"),
}


@pytest.mark.parametrize("case", sorted(BAD_DATA))
def test_bad_data_sections_are_refused_before_running(case, two_devices, tmp_path, capsys):
    data, expected = BAD_DATA[case]
    two_devices["data"] = data
    file = write_yaml(tmp_path / "bad.yaml", two_devices)
    assert main(["validate", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {file}: {expected}") and err.count("\n") == 1, err


def test_data_problems_found_when_loading_name_the_field(two_devices, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    cases = [({"name": "cifar10", "root": "empty"}, "data.root: "),
             ({"name": "emnist", "root": "empty", "options": {"split": "nope"}}, "data.options: unknown EMNIST split"),
             ({"name": "mnist5k", "partition": {"kind": "natural"}},
              "data.partition: dataset 'mnist5k' has no natural clients")]
    for data, expected in cases:
        two_devices["data"] = data
        file = write_yaml(tmp_path / "bad.yaml", two_devices)
        assert main(["run", str(file), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {file}: {expected}") and err.count("\n") == 1, err
        assert "cifar-10" in err or "EMNIST" in err or "natural" in err


def test_models_lists_every_model_with_its_counts(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "cnn_feddumap" in out and "122,570" in out and "4,548,608" in out  # FedDUMAP: 4.549 M
    assert "cnn_fedlion" in out and "26,010" in out


def test_a_crash_mid_run_keeps_the_rounds_and_says_so(two_devices, tmp_path, monkeypatch):
    from testbed.algorithms.fedavg import FedAvg

    calls = {"n": 0}
    aggregate = FedAvg.aggregate

    def crash_in_round_two(self, state, round, arrivals, failures):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("simulated bug")
        return aggregate(self, state, round, arrivals, failures)

    monkeypatch.setattr(FedAvg, "aggregate", crash_in_round_two)
    file = write_yaml(tmp_path / "s.yaml", two_devices)
    assert main(["run", str(file), "--out", str(tmp_path), "--quiet"]) == 1  # a bug: one line, exit code 1
    run = tmp_path / "two_devices" / "0"
    assert "RuntimeError: simulated bug" in (run / "error.log").read_text()
    assert len(pd.read_csv(run / "rounds.csv")) == 1
    assert json.loads((run / "summary.json").read_text())["status"] == "crashed: RuntimeError: simulated bug"


def test_set_reaches_into_lists_and_names_a_bad_index():
    from testbed.errors import TestbedError
    from testbed.scenario import apply_overrides

    raw = {"fleet": {"groups": [{"count": 3, "resample_tiers_each_round": True}]}}
    apply_overrides(raw, ["fleet.groups.0.resample_tiers_each_round=false", "stop.max_rounds=2"])
    assert raw == {"fleet": {"groups": [{"count": 3, "resample_tiers_each_round": False}]}, "stop": {"max_rounds": 2}}
    with pytest.raises(TestbedError, match="'1' is not an index of this 1-item list"):
        apply_overrides(raw, ["fleet.groups.1.count=2"])
    with pytest.raises(TestbedError, match="the value before 'x' is not a section"):
        apply_overrides(raw, ["stop.max_rounds.x=1"])


@pytest.mark.parametrize("command", [[], ["run"], ["validate"], ["sweep"], ["report"], ["compare"], ["calibrate"],
                                     ["models"]])
def test_every_help_page_prints(command, capsys):
    """argparse formats help strings with %: a bare percent sign in one once broke `testbed --help`."""
    with pytest.raises(SystemExit) as end:
        main([*command, "--help"])
    assert end.value.code == 0 and "usage: testbed" in capsys.readouterr().out
