"""compare: runs grouped by everything but the seed, mean and spread over seeds, speedups against a baseline
under the same conditions, and the comparison plots; every number checked by hand on the study of conftest:

tiny run: accuracy 0.8 first reached in round 4 at 52.5 s, 11,000 uplink bytes, 3,000 FLOPs.
slower: in round 5 at 60 s, 14,000 bytes, 3,900 FLOPs. faster: in round 2 at 25 s, 5,000 bytes, 1,200 FLOPs.
"""
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.compare import compare_table, group_runs, write_compare
from analysis.compare_plots import participation
from analysis.runs import load_run
from testbed.cli import main

GROUPS = ["fedavg, heterogeneity=low", "fedlps, heterogeneity=low", "fedavg, heterogeneity=high",
          "fedlps, heterogeneity=high"]


def test_runs_that_differ_only_in_seed_form_one_group_labelled_by_what_differs(study):
    groups, fields = group_runs([load_run(folder) for folder in study])
    assert list(groups) == GROUPS
    assert [run.seed for run in groups["fedavg, heterogeneity=low"]] == [0, 1]
    assert fields.to_dict("list") == {"algorithm": ["fedavg", "fedlps", "fedavg", "fedlps"],
                                      "fleet.heterogeneity": ["low", "low", "high", "high"]}


def test_mean_and_spread_over_seeds_and_speedup_against_the_same_level(study):
    table = compare_table([load_run(folder) for folder in study], [0.8], baseline="fedavg").set_index("group")
    low = table.loc["fedavg, heterogeneity=low"]
    assert low["seeds"] == 2 and low["reached@0.8"] == "2/2"
    assert low["time_s@0.8"] == pytest.approx((52.5 + 60) / 2)
    assert low["time_s@0.8_std"] == pytest.approx(7.5 / np.sqrt(2))  # sample std of two values 7.5 apart
    assert low["uplink_MB@0.8"] == pytest.approx((0.011 + 0.014) / 2)
    assert low["TFLOPs@0.8"] == pytest.approx((3000 + 3900) / 2 / 1e12)
    assert low["rounds@0.8"] == 4.5
    # each method against fedavg at its own heterogeneity level: the geometric mean time over the group's
    assert table["speedup@0.8"].to_dict() == pytest.approx({
        "fedavg, heterogeneity=low": 1.0, "fedlps, heterogeneity=low": np.sqrt(52.5 * 60) / 25,
        "fedavg, heterogeneity=high": 1.0, "fedlps, heterogeneity=high": 60 / 52.5})
    assert table["fleet.heterogeneity"].tolist() == ["low", "low", "high", "high"]


def test_how_a_run_was_carried_out_does_not_split_groups(study):
    with open(study[1] / "scenario.resolved.yaml", "a") as scenario:
        scenario.write("executor: {kind: batched, max_clients: 4}\ncheckpoint: {every_rounds: 1}\n")
    groups, _ = group_runs([load_run(folder) for folder in study])
    assert list(groups) == GROUPS and len(groups[GROUPS[0]]) == 2


def test_an_algorithms_own_settings_neither_split_nor_rename_groups(study):
    """As a sweep writes them: fedlps with its defaults beside fedavg, and a grid over FedProx's mu."""
    def scenario_of(folder, algorithm):
        lines = (folder / "scenario.resolved.yaml").read_text().splitlines()
        lines = [algorithm if line.startswith("algorithm:") else line for line in lines]
        (folder / "scenario.resolved.yaml").write_text("\n".join(lines) + "\n")

    for folder in study[2], study[4]:
        scenario_of(folder, "algorithm: {name: fedlps, mu: 0.0, ratio: {kind: pucbv}}")
    groups, fields = group_runs([load_run(folder) for folder in study])
    assert list(groups) == GROUPS and list(fields.columns) == ["algorithm", "fleet.heterogeneity"]
    table = compare_table([load_run(folder) for folder in study], [0.8], baseline="fedavg")
    assert table["speedup@0.8"].tolist() == pytest.approx([1.0, np.sqrt(52.5 * 60) / 25, 1.0, 60 / 52.5])

    scenario_of(study[4], "algorithm: {name: fedlps, mu: 1.0, ratio: {kind: pucbv}}")
    groups, _ = group_runs([load_run(folder) for folder in study])
    assert list(groups) == ["fedavg, heterogeneity=low", "fedlps, heterogeneity=low, mu=0.0",
                            "fedavg, heterogeneity=high", "fedlps, heterogeneity=high, mu=1.0"]


def test_a_group_label_as_baseline_sets_every_group_against_it(study):
    table = compare_table([load_run(folder) for folder in study], [0.8], baseline="fedavg, heterogeneity=high")
    assert table["speedup@0.8"].tolist() == pytest.approx([60 / np.sqrt(52.5 * 60), 60 / 25, 1.0, 60 / 52.5])


def test_no_speedup_where_a_target_is_missed(study):
    table = compare_table([load_run(folder) for folder in study], [0.8, 0.84], baseline="fedavg")
    # at 0.84 only the slower runs (0.85 in round 5) and the faster one (0.85 in round 2) get there
    assert table["reached@0.84"].tolist() == ["1/2", "1/1", "1/1", "0/1"]
    assert table["speedup@0.84"].tolist()[:3] == pytest.approx([1.0, 60 / 25, 1.0])
    assert np.isnan(table["speedup@0.84"].iloc[3])


def test_participation_marks_each_device_round(run_dir):
    cells = participation(load_run(run_dir))
    # round 1: b dropped; round 2: b late; rounds 3-4: no events; round 5: c surplus
    assert cells.loc["a"].tolist() == [1, 1, 0, 0, 1]
    assert cells.loc["b"].tolist() == [4, 3, 0, 0, 1]
    assert cells.loc["c"].tolist() == [1, 1, 0, 0, 2]


def test_participation_leaves_out_a_server_phase(run_dir):
    events = run_dir / "events.csv"
    events.write_text(events.read_text() + "-1,1,server,10.0,10.5,done\n")
    assert list(participation(load_run(run_dir)).index) == ["a", "b", "c"]


def test_write_compare_writes_the_table_and_every_plot(study, tmp_path):
    out = tmp_path / "compare"
    table, written = write_compare(study, out, [0.8], baseline="fedavg")
    assert {path.name for path in written} == {
        "compare.csv", "intervals.csv", "accuracy_by_group_vs_time.png", "tta_vs_heterogeneity_0.8.png", "breakdown_by_group.png",
        *(f"{kind}_{name}.png" for kind in ("participation", "gantt")
          for name in ("fedavg_heterogeneity-low", "fedlps_heterogeneity-low", "fedavg_heterogeneity-high",
                       "fedlps_heterogeneity-high"))}
    assert all(path.read_bytes()[:4] == b"\x89PNG" for path in written if path.suffix == ".png")
    assert pd.read_csv(out / "compare.csv")["speedup@0.8"].tolist() == pytest.approx(table["speedup@0.8"].tolist())


def test_the_command_prints_mean_std_and_refuses_an_unknown_baseline(study, tmp_path, capsys, unrendered):
    out = tmp_path / "compare"
    assert main(["compare", *map(str, study), "--baseline", "fedavg", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    # sqrt(52.5 * 60) / 25 = 2.245: the geometric mean time of the baseline's two seeds over the group's one
    assert "56.2±5.3" in printed and "2.245" in printed and str(out / "compare.csv") in printed
    assert main(["compare", *map(str, study), "--baseline", "fedsgd", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == ("error: --baseline fedsgd: no group or algorithm of that name among the runs; choose one of: "
                   "'fedavg', 'fedlps', 'fedavg, heterogeneity=low', 'fedlps, heterogeneity=low', "
                   "'fedavg, heterogeneity=high', 'fedlps, heterogeneity=high'\n")


def test_groups_that_differ_in_a_long_field_are_labelled_by_scenario_name(study):
    """Availability set per group differs in all of fleet.groups: a label of it would not fit a file name."""
    groups = "[" + ", ".join(f"{{profile: phone_low, count: 20, availability: {{kind: {kind}}}}}"
                             for kind in ("always_on", "markov")) + "]"
    scenario = study[3] / "scenario.resolved.yaml"
    scenario.write_text(scenario.read_text().replace("fleet: {heterogeneity: high}",
                                                     f"fleet: {{heterogeneity: high, groups: {groups}}}"))
    labels, fields = group_runs([load_run(folder) for folder in study[3:]])
    assert list(labels) == ["tiny-fedavg-high", "tiny-fedlps-high"] and fields.empty


def test_a_run_without_a_selection_section_is_labelled_uniform_beside_one_with():
    """A resolved scenario leaves out the default selection; beside a run that selects otherwise, compare names
    both: selection=uniform and selection=oort (not an empty label and name=oort)."""
    import pandas as pd

    from analysis.compare import group_runs
    from analysis.runs import Run

    base = {"name": "s", "algorithm": {"name": "fedavg"}, "seed": 0}
    runs = [Run(Path("a"), "s", 0, "fedavg", base, pd.DataFrame(), pd.DataFrame(), {}),
            Run(Path("b"), "s-oort", 0, "fedavg", base | {"selection": {"name": "oort", "options": {}}},
                pd.DataFrame(), pd.DataFrame(), {})]
    groups, _ = group_runs(runs)
    assert list(groups) == ["selection=uniform", "selection=oort"]


def test_compare_writes_beside_the_runs_by_default(study, tmp_path, monkeypatch, unrendered):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)   # where a user may stand: compare/ must not land here
    assert main(["compare", *map(str, study)]) == 0
    beside = Path(os.path.commonpath([p.resolve().parent for p in study])) / "compare"
    assert (beside / "compare.csv").is_file() and not (elsewhere / "compare").exists()
