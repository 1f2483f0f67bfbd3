"""A scenario whose fleet uses a user's device catalog file (fleet.catalog), end to end through the CLI.

The file's one profile, `lab_phone`: 2e9 FLOP/s peak at efficiency 0.5 (1e9 FLOP/s training), down 2,600 B/s,
up 1,300 B/s, latency 0.25 s; 2 W training, 1 W sending, 0.5 W receiving.
logreg on the 8x8 digits has 64 x 10 + 10 = 650 parameters: 2,600 bytes each way in fp32, and 640 multiply-adds
per sample forward (the bias adds are not counted); a local epoch over n samples costs 3 x 640 x n multiply-adds,
2 FLOP each. So each round, for a device holding n samples:
    download 0.25 + 2,600 / 2,600 = 1.25 s at 0.5 W = 0.625 J
    compute  3,840 n / 1e9 s at 2 W
    upload   0.25 + 2,600 / 1,300 = 2.25 s at 1 W = 2.25 J
"""
import hashlib
import pickle

import pandas as pd
import pytest
import yaml
from helpers import write_yaml

from testbed.cli import main
from testbed.scenario import load

FIGURES = {"peak_flops": 2e9, "efficiency": 0.5, "up_Bps": 1300, "down_Bps": 2600, "latency_s": 0.25,
           "train_W": 2, "up_W": 1, "down_W": 0.5, "idle_W": 0.25, "memory_bytes": 2**30}
LAB_PHONE = {"name": "lab_phone"} | {key: value for figure, number in FIGURES.items()
                                     for key, value in ((figure, number), (f"{figure}_source", f"test: {figure}"))}


def catalog(folder, syntax="yaml", profile=LAB_PHONE):
    path = folder / f"my_devices.{syntax}"
    if syntax == "yaml":
        path.write_text(yaml.safe_dump([profile]))
    else:
        pd.DataFrame([profile]).to_csv(path, index=False)
    return path


def scenario(folder, **fleet):
    return write_yaml(folder / "mine.yaml", {
        "name": "mine", "seed": 0, "data": {"name": "digits", "partition": {"kind": "iid"}},
        "model": {"name": "logreg"},
        "fleet": {"catalog": "my_devices.yaml", "groups": [{"profile": "lab_phone", "count": 2}]} | fleet,
        "round": {"clients_per_round": 2}, "client": {"lr": 0.05, "local_epochs": 1, "batch_size": 10},
        "algorithm": {"name": "fedavg"}, "stop": {"max_rounds": 2}, "resources": {"energy": True}})


@pytest.mark.parametrize("syntax", ["yaml", "csv"])
def test_the_files_figures_give_the_events_by_hand(tmp_path, syntax):
    catalog(tmp_path, syntax)
    file = scenario(tmp_path, catalog=f"my_devices.{syntax}")
    assert main(["run", str(file), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
    run = tmp_path / "runs" / "mine" / "0"
    devices = pd.read_csv(run / "devices.csv")
    assert list(devices["profile"]) == ["lab_phone"] * 2
    assert list(devices["peak_flops"]) == [2e9] * 2 and list(devices["up_Bps"]) == [1300] * 2
    events = pd.read_csv(run / "events.csv").set_index(["round", "device", "phase"])
    start = 0.0
    for round_ in (1, 2):
        ends = []
        for device, n in enumerate(devices["num_samples"]):
            compute_s = 3 * 640 * n * 2 / 1e9
            expected = {"download": (start, start + 1.25, 0.625),
                        "compute": (start + 1.25, start + 1.25 + compute_s, 2 * compute_s),
                        "upload": (start + 1.25 + compute_s, start + 3.5 + compute_s, 2.25)}
            for phase, (begin, end, joules) in expected.items():
                row = events.loc[(round_, device, phase)]
                assert (row["start_s"], row["end_s"], row["energy_J"]) == pytest.approx((begin, end, joules),
                                                                                         rel=1e-12, abs=1e-12)
                assert row["outcome"] == "done"
            ends.append(start + 3.5 + compute_s)
        start = max(ends)  # the next round starts when the last upload is in


@pytest.fixture
def finished_run(tmp_path):
    path = catalog(tmp_path)
    file = scenario(tmp_path)
    assert main(["run", str(file), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
    return path, file, tmp_path / "runs" / "mine" / "0"


def test_the_run_folder_records_the_file_and_is_reported_without_it(finished_run, capsys):
    path, file, run = finished_run
    resolved = yaml.safe_load((run / "scenario.resolved.yaml").read_text())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert resolved["fleet"]["catalog"] == [{"file": str(path), "sha256": digest}]
    assert load(file).fleet.catalog[0].sha256 == digest
    path.unlink()  # a received run folder: the catalog stayed behind
    capsys.readouterr()
    assert main(["report", str(run)]) == 0
    assert (run / "plots" / "report.md").is_file()


def test_resume_with_other_contents_of_the_catalog_is_refused(finished_run, capsys):
    path, file, run = finished_run
    catalog(path.parent, profile=LAB_PHONE | {"train_W": 3})
    capsys.readouterr()
    assert main(["run", str(file), "--out", str(run.parent.parent), "--quiet", "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "checkpoint.pt: the checkpoint belongs to another version of this scenario " \
                                   "(a field, a --set or a fleet.catalog file's contents differ)" in err, err


def test_a_validated_scenario_carries_its_profiles_without_the_file(tmp_path):
    """--jobs and --ray ship the validated scenario to other processes, where the file may not be."""
    path = catalog(tmp_path)
    scenario_ = load(scenario(tmp_path))
    path.unlink()
    shipped = pickle.loads(pickle.dumps(scenario_))
    assert shipped == scenario_
    group = shipped.fleet.specs()[0]
    assert (group.profile.name, group.profile.train_flops_per_s, group.profile.train_W) == ("lab_phone", 1e9, 2.0)
    assert group.profile.source.startswith("peak_flops: test: peak_flops; efficiency: test: efficiency;")


def test_groups_override_a_file_profile_as_a_builtin(tmp_path):
    catalog(tmp_path)
    fleet = load(scenario(tmp_path, groups=[{"profile": "lab_phone", "count": 1, "up_Bps": 100, "memory_MB": 64},
                                            {"profile": "phone_low", "count": 1}])).fleet
    mine, builtin = fleet.specs()
    assert (mine.profile.up_Bps, mine.profile.down_Bps, mine.profile.memory_bytes) == (100, 2600, 64 * 2**20)
    assert builtin.profile.name == "phone_low"


def test_a_builtin_only_scenario_resolves_as_before(two_devices):
    from testbed.runlog import resolved
    from testbed.scenario import validate

    assert "catalog" not in yaml.safe_load(resolved(validate(two_devices)))["fleet"]


def other_catalog(folder):
    path = folder / "more.csv"
    pd.DataFrame([LAB_PHONE]).to_csv(path, index=False)
    return path


BAD = {
    "an unknown profile lists the file's": (
        lambda folder: {"groups": [{"profile": "lab_fone", "count": 2}]},
        "fleet.groups.0.profile: unknown device profile 'lab_fone'; choose one of: fedlps_adreno630, jetson_nano, "
        "jetson_tx2, jetson_xavier_nx, phone_high, phone_low, phone_mid, raspberry_pi_4, server_a100; or one of "
        "fleet.catalog's: lab_phone"),
    "no such file": (lambda folder: {"catalog": "nowhere.yaml"},
                     "fleet.catalog.0.file: no device catalog file at {folder}/nowhere.yaml; give a path relative to "
                     "the scenario file"),
    "a bad figure in the file": (
        lambda folder: catalog(folder, profile=LAB_PHONE | {"efficiency": 4}) and {},
        "fleet.catalog.0: {folder}/my_devices.yaml: profile 'lab_phone' (entry 1): efficiency must be a number in "
        "(0, 1], got 4.0; correct it in the file"),
    "a figure without its source": (
        lambda folder: catalog(folder, profile={k: v for k, v in LAB_PHONE.items() if k != "up_W_source"}) and {},
        "fleet.catalog.0: {folder}/my_devices.yaml: profile 'lab_phone' (entry 1): up_W_source: every figure needs "
        "its source"),
    "the same name in two files": (
        lambda folder: {"catalog": ["my_devices.yaml", other_catalog(folder).name]},
        "fleet.catalog: {folder}/my_devices.yaml and {folder}/more.csv both have a profile 'lab_phone'; rename "
        "one of them"),
    "a pinned digest of other contents": (
        lambda folder: {"catalog": [{"file": "my_devices.yaml", "sha256": "0" * 64}]},
        "fleet.catalog.0: {folder}/my_devices.yaml no longer has the contents sha256 pins (its digest is now "),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_catalogs_give_one_line_and_exit_2(tmp_path, capsys, case):
    fleet, expected = BAD[case]
    catalog(tmp_path)
    file = scenario(tmp_path, **fleet(tmp_path))
    assert main(["validate", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: {file}: {expected.format(folder=tmp_path)}"), err
