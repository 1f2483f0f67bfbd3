"""A user's device catalog file (devices/catalog_file.py): YAML and CSV read into the same profiles, in
DeviceProfile's units, with a source for every figure; every bad file is one line naming the file, the profile,
the key and the fix."""
import hashlib

import pytest

from devices import CATALOG, DeviceProfile
from devices.catalog_file import load_device_catalog

YAML = """\
- name: pixel7_cpu
  peak_flops: 1.2e11          # PyYAML reads this as text; the loader takes it as the number
  peak_flops_source: Tensor G2 CPU cores, vendor sheet
  efficiency: 0.04
  efficiency_source: "assumed: as the built-in phones"
  up_Bps: 1250000
  up_Bps_source: Ookla 10 Mbit/s
  down_Bps: 5.0e+6
  down_Bps_source: Ookla 40 Mbit/s
  latency_s: 0.03
  latency_s_source: "assumed: 60 ms round trip"
  train_W: 3
  train_W_source: measured with a USB meter
  memory_bytes: 2147483648
  memory_bytes_source: "assumed: a third of 6 GiB"
- name: lab-board.v2
  peak_flops: 8e9
  peak_flops_source: HPL
  efficiency: 0.25
  efficiency_source: assumed
  up_Bps: 1e7
  up_Bps_source: lab Wi-Fi
  down_Bps: 1e7
  down_Bps_source: lab Wi-Fi
  latency_s: 0
  latency_s_source: none modelled
"""

CSV = """\
name,peak_flops,peak_flops_source,efficiency,efficiency_source,up_Bps,up_Bps_source,down_Bps,down_Bps_source,\
latency_s,latency_s_source,train_W,train_W_source,memory_bytes,memory_bytes_source
pixel7_cpu,1.2e11,"Tensor G2 CPU cores, vendor sheet",0.04,assumed: as the built-in phones,1250000,Ookla 10 Mbit/s,\
5.0e+6,Ookla 40 Mbit/s,0.03,assumed: 60 ms round trip,3,measured with a USB meter,2147483648,\
assumed: a third of 6 GiB

lab-board.v2,8e9,HPL,0.25,assumed,1e7,lab Wi-Fi,1e7,lab Wi-Fi,0,none modelled,,,,
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_yaml_and_csv_give_the_same_profiles_in_deviceprofile_units(tmp_path):
    from_yaml = load_device_catalog(write(tmp_path, "mine.yaml", YAML))
    from_csv = load_device_catalog(write(tmp_path, "mine.csv", CSV))
    assert list(from_yaml.profiles) == ["pixel7_cpu", "lab-board.v2"]
    assert from_yaml.profiles == from_csv.profiles
    phone = from_yaml.profiles["pixel7_cpu"]
    assert phone == DeviceProfile(
        name="pixel7_cpu", peak_flops=1.2e11, efficiency=0.04, up_Bps=1.25e6, down_Bps=5e6, latency_s=0.03,
        train_W=3.0, memory_bytes=2**31,
        source="peak_flops: Tensor G2 CPU cores, vendor sheet; efficiency: assumed: as the built-in phones; "
               "up_Bps: Ookla 10 Mbit/s; down_Bps: Ookla 40 Mbit/s; latency_s: assumed: 60 ms round trip; "
               "train_W: measured with a USB meter; memory_bytes: assumed: a third of 6 GiB")
    assert phone.train_flops_per_s == pytest.approx(4.8e9)
    board = from_csv.profiles["lab-board.v2"]
    assert (board.latency_s, board.train_W, board.memory_bytes) == (0.0, None, None)  # empty cells: not given


def test_the_digest_is_that_of_the_bytes_read(tmp_path):
    path = write(tmp_path, "mine.yaml", YAML)
    assert load_device_catalog(path).sha256 == hashlib.sha256(YAML.encode()).hexdigest()


def entry(**changes) -> str:
    """The YAML file with its first profile changed (a None value removes the key)."""
    lines = []
    first = YAML.split("- name: lab-board.v2")[0].splitlines()
    fields = dict(line.strip().lstrip("- ").split(": ", 1) for line in first)
    fields = {k: v.split("  #")[0] for k, v in fields.items()}
    for key, value in {**fields, **changes}.items():
        if value is not None:
            lines.append(f"  {key}: {value}")
    return "-" + "\n".join(lines)[1:] + "\n"


BAD_YAML = {
    "a figure without its source": (entry(train_W_source=None),
                                     "profile 'pixel7_cpu' (entry 1): train_W_source: every figure needs its source"),
    "an empty source": (entry(efficiency_source="''"),
                        "profile 'pixel7_cpu' (entry 1): efficiency_source: every figure needs its source"),
    "a source without its figure": (entry(idle_W_source="guess"),
                                     "profile 'pixel7_cpu' (entry 1): idle_W_source: a source for no figure; add "
                                     "idle_W or remove idle_W_source"),
    "a missing required figure": (entry(up_Bps=None, up_Bps_source=None),
                                  "profile 'pixel7_cpu' (entry 1): up_Bps: required; add it with its up_Bps_source"),
    "a value that is no number": (entry(down_Bps="fast"),
                                  "profile 'pixel7_cpu' (entry 1): down_Bps: 'fast' is not a number; give a finite "
                                  "number (bytes/s)"),
    "a boolean": (entry(train_W="true"), "profile 'pixel7_cpu' (entry 1): train_W: True is not a number"),
    "a negative value": (entry(peak_flops=-1),
                         "profile 'pixel7_cpu' (entry 1): peak_flops must be a finite number > 0, got -1.0; correct "
                         "it in the file"),
    "an efficiency above 1": (entry(efficiency=2),
                              "profile 'pixel7_cpu' (entry 1): efficiency must be a number in (0, 1], got 2.0"),
    "a negative power": (entry(train_W=-3), "profile 'pixel7_cpu' (entry 1): train_W must be a finite number >= 0"),
    "an infinite value": (entry(latency_s=".inf"), "profile 'pixel7_cpu' (entry 1): latency_s must be a finite number >= 0, got inf"),
    "an unknown key": (entry(flops="1e9"), "profile 'pixel7_cpu' (entry 1): flops: unknown key; use name, the "
                                           "figures (peak_flops, efficiency, up_Bps"),
    "a missing name": (entry(name=None), "profile without a name (entry 1): name: required; give the profile a name"),
    "a name with a space": (entry(name="'my phone'"), "profile 'my phone' (entry 1): name: 'my phone' is not a name"),
    "a built-in's name": (entry(name="phone_mid"),
                          "profile 'phone_mid' (entry 1): name: 'phone_mid' is a built-in profile; rename yours "
                          "(e.g. 'phone_mid_mine'), or remove it from the file and use the built-in"),
    "a duplicate name": (YAML + YAML.split("- name: lab-board.v2")[0],
                         "profile 'pixel7_cpu' (entry 3): name: 'pixel7_cpu' is already a profile of this file; "
                         "give each profile its own name"),
    "not a list": ("pixel7_cpu: {peak_flops: 1}\n", "a YAML device catalog is a list of profiles"),
    "an entry that is no mapping": ("- pixel7_cpu\n", "entry 1: a profile is a mapping"),
    "no profiles": ("# nothing yet\n", "no profiles; add at least one"),
    "broken YAML": ("- name: [x\n", "not valid YAML"),
}


def assert_refused(path, expected):
    with pytest.raises(ValueError) as error:
        load_device_catalog(path)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"{path}") and expected in message, message


@pytest.mark.parametrize("case", sorted(BAD_YAML))
def test_a_bad_yaml_catalog_is_one_line_naming_file_profile_and_key(tmp_path, case):
    text, expected = BAD_YAML[case]
    assert_refused(write(tmp_path, "mine.yaml", text), expected)


CSV_HEADER, CSV_PHONE, _, CSV_BOARD = CSV.splitlines()[:4]

BAD_CSV = {
    "a figure without its source": (CSV_HEADER + "\n" + CSV_BOARD.replace(",HPL,", ",,") + "\n",
                                    "profile 'lab-board.v2' (line 2): peak_flops_source: every figure needs its "
                                    "source"),
    "a value that is no number": (CSV_HEADER + "\n" + CSV_BOARD.replace("8e9", "8 GFLOPS") + "\n",
                                  "profile 'lab-board.v2' (line 2): peak_flops: '8 GFLOPS' is not a number; give a "
                                  "finite number (FLOP/s)"),
    "a negative value on line 3": (CSV_HEADER + "\n" + CSV_BOARD + "\n" + CSV_BOARD.replace("lab-board.v2,8e9",
                                                                                        "other,-8e9") + "\n",
                                   "profile 'other' (line 3): peak_flops must be a finite number > 0, got -8000000000.0"),
    "an unknown column": (CSV_HEADER + ",colour\n" + CSV_BOARD + ",red\n",
                          "profile 'lab-board.v2' (line 2): colour: unknown key"),
    "a duplicate name": (CSV_HEADER + "\n" + CSV_BOARD + "\n" + CSV_BOARD + "\n",
                         "profile 'lab-board.v2' (line 3): name: 'lab-board.v2' is already a profile of this file"),
    "a missing required column": (CSV_HEADER.replace("latency_s,latency_s_source,", "") + "\n"
                                  + CSV_BOARD.replace("0,none modelled,", "") + "\n",
                                  "profile 'lab-board.v2' (line 2): latency_s: required"),
    "a row longer than the header": (CSV_HEADER + "\n" + CSV_BOARD + ",extra,cells\n",
                                     "line 2: more cells than the header's 15 columns"),
    "a header alone": (CSV_HEADER + "\n", "no profiles; add at least one"),
}


@pytest.mark.parametrize("case", sorted(BAD_CSV))
def test_a_bad_csv_catalog_is_one_line_naming_file_line_and_column(tmp_path, case):
    text, expected = BAD_CSV[case]
    assert_refused(write(tmp_path, "mine.csv", text), expected)


def test_other_file_kinds_and_other_encodings(tmp_path):
    with pytest.raises(ValueError, match=r"mine\.json: a device catalog is a \.yaml, \.yml or \.csv file"):
        load_device_catalog(write(tmp_path, "mine.json", "[]"))
    latin = tmp_path / "mine.csv"
    latin.write_bytes("name\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"mine\.csv: not UTF-8 text \(byte 8\); save it as UTF-8"):
        load_device_catalog(latin)


def test_no_name_of_the_builtin_catalog_is_taken(tmp_path):
    for name in CATALOG:
        with pytest.raises(ValueError, match=f"'{name}' is a built-in profile"):
            load_device_catalog(write(tmp_path, "mine.yaml", entry(name=name)))
