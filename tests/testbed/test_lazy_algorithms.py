"""The `algorithm:` section is read by the named algorithm's config alone (testbed/schema/algorithms/__init__.py):
importing the schema imports no config family and no numpy; validating a section imports its family only; its
errors keep the locations and the wording they had when every config was a member of the union (the location
below the name's tag, algorithm.fedprox.mu, worded algorithm.mu; the closest key of that algorithm's own);
the resolved scenario holds the config as itself, and the JSON schema each config's; and BUILTIN names exactly the
configs the families define."""
import copy
import inspect
import json
import os
import subprocess
import sys
from typing import Literal, get_args, get_origin

import pytest
from helpers import ROOT
from pydantic import ValidationError

from testbed.scenario_file import read_yaml
from testbed.schema.algorithms import BUILTIN, AlgorithmConfig, PluginAlgorithm, runs_async
from testbed.schema.errors import describe
from testbed.schema.scenario import Scenario

FAMILIES = ("dense", "submodels", "adaptive", "server_data", "flower")
QUICKSTART = read_yaml(ROOT / "scenarios" / "quickstart.yaml")
# what a fresh interpreter imported, as JSON on its last line
IMPORTED = ("import json, sys; print(json.dumps({'numpy': 'numpy' in sys.modules, 'families': sorted(m for m in ["
            + ", ".join(f"'{f}'" for f in FAMILIES) + "] if 'testbed.schema.algorithms.' + m in sys.modules)}))")


def _fresh(code: str) -> tuple[list[str], dict]:
    """Run `code` then IMPORTED in a fresh interpreter with this worktree's code: its other output lines, and what
    it had imported."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", f"{code}\n{IMPORTED}"], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    *lines, imported = done.stdout.splitlines()
    return lines, json.loads(imported)


def test_the_schema_imports_no_family_and_no_numpy():
    assert _fresh("import testbed.schema.scenario") == ([], {"numpy": False, "families": []})


def test_a_section_imports_its_family_alone():
    """A misspelt option of fedprox, validated in a fresh interpreter: dense is imported, and the closest key is
    fedprox's own (no other family is there to offer one)."""
    code = ("from pydantic import ValidationError\nfrom testbed.scenario_file import read_yaml\n"
            "from testbed.schema.errors import describe\nfrom testbed.schema.scenario import Scenario\n"
            "raw = read_yaml('scenarios/quickstart.yaml')\nraw['algorithm'] = {'name': 'fedprox', 'muu': 1}\n"
            "try:\n    Scenario.model_validate(raw)\nexcept ValidationError as err:\n    print(describe(err))")
    lines, imported = _fresh(code)
    assert lines == ["algorithm.muu: unknown key; remove it or correct its spelling: did you mean 'mu'?"]
    assert imported == {"numpy": False, "families": ["dense"]}


def _errors(section) -> tuple[str, list]:
    raw = copy.deepcopy(QUICKSTART)
    raw["algorithm"] = section
    with pytest.raises(ValidationError) as caught:
        Scenario.model_validate(raw)
    return describe(caught.value), [(e["type"], e["loc"]) for e in caught.value.errors()]


SPELLING = "unknown key; remove it or correct its spelling"


@pytest.mark.parametrize("section, line, errors", [
    ({"name": "fedprox", "muu": 1}, f"algorithm.muu: {SPELLING}: did you mean 'mu'?",
     [("extra_forbidden", ("algorithm", "fedprox", "muu"))]),
    ({"name": "fedavg", "lrr": 1}, f"algorithm.lrr: {SPELLING}",   # fedavg has no option: nothing is close
     [("extra_forbidden", ("algorithm", "fedavg", "lrr"))]),
    # inside the config's own tagged union (FedLPS's ratio rule): the pucbv kind's keys
    ({"name": "fedlps", "ratio": {"kind": "pucbv", "exploraton": 1}},
     f"algorithm.ratio.exploraton: {SPELLING}: did you mean 'exploration'?",
     [("extra_forbidden", ("algorithm", "fedlps", "ratio", "pucbv", "exploraton"))]),
    ({"name": "fedprox", "mu": -1}, "algorithm.mu: Input should be greater than or equal to 0 (got -1)",
     [("greater_than_equal", ("algorithm", "fedprox", "mu"))]),
    ({"name": "fedprox", "mu": -1, "x": 2}, f"algorithm.x: {SPELLING} (and 1 more)",
     [("greater_than_equal", ("algorithm", "fedprox", "mu")), ("extra_forbidden", ("algorithm", "fedprox", "x"))]),
    ({"mu": 1}, "algorithm.name: missing; it selects the kind of this section",
     [("union_tag_not_found", ("algorithm",))]),
    ("fedavg", "algorithm.name: missing; it selects the kind of this section",
     [("union_tag_not_found", ("algorithm",))]),
    ({"name": False}, "algorithm.name: Input should be a valid string (got False); YAML reads off, no and false as "
     "the boolean False: quote the word, e.g. 'off'", [("string_type", ("algorithm", "plugin", "name"))]),
])
def test_a_sections_errors_keep_their_locations_and_words(section, line, errors):
    assert _errors(section) == (line, errors)


def test_an_unknown_name_lists_the_built_ins_in_order():
    line, errors = _errors({"name": "fedavgg"})
    assert errors == [("value_error", ("algorithm", "plugin", "name"))]
    assert line.startswith("algorithm.name: unknown 'fedavgg'; choose one of: 'fedavg', 'fedprox', 'fedavgm', "
                           "'fedadagrad', 'fedadam', 'fedyogi', 'fedlps', 'flst', ")
    assert line.endswith(", 'hybrid_fl', 'flower'; or name your own Strategy as 'package.module:Class'")
    assert line.count("', '") == len(BUILTIN) - 1 == 45


def test_the_asynchronous_ones_are_listed():
    assert runs_async() == ["fedadagrad", "fedadam", "fedavg", "fedavgm", "fedprox", "fedyogi"]


@pytest.mark.parametrize("section, written", [
    ({"name": "fedprox", "mu": 0.1}, {"name": "fedprox", "mu": 0.1}),
    ({"name": "fedadam"}, {"name": "fedadam", "server_lr": 0.01, "beta1": 0.9, "tau": 1e-3, "beta2": 0.99}),
    ({"name": "fedlps", "ratio": {"kind": "fixed", "ratio": 0.5}},
     {"name": "fedlps", "ratio": {"kind": "fixed", "ratio": 0.5, "cap": False}, "mu": 1.0, "lam": 1.0,
      "code_faithful": False}),
])
def test_the_resolved_scenario_holds_the_config_as_itself(section, written):
    raw = copy.deepcopy(QUICKSTART)
    raw["algorithm"] = section
    scenario = Scenario.model_validate(raw)
    assert type(scenario.algorithm) is BUILTIN[section["name"]]
    dumped = scenario.model_dump(mode="json")
    assert dumped["algorithm"] == written
    assert Scenario.model_validate(dumped) == scenario


def test_a_scenario_unpickled_where_its_config_was_never_built_is_written_out_alike(tmp_path):
    """A sweep's worker receives its scenario pickled: its config class, never used there, is built when the
    scenario is written out (a serializer inferred from the value's class found it unbuilt: a TypeError)."""
    import pickle
    raw = copy.deepcopy(QUICKSTART)
    raw["algorithm"] = {"name": "fedlps", "ratio": {"kind": "fixed", "ratio": 0.5}}
    scenario = Scenario.model_validate(raw)
    (tmp_path / "s.pkl").write_bytes(pickle.dumps(scenario))
    lines, imported = _fresh(f"import json, pickle\ns = pickle.loads(open({str(tmp_path / 's.pkl')!r}, 'rb').read())\n"
                             "print(json.dumps(s.model_dump(mode='json')))\nprint(s.model_dump_json())")
    assert [json.loads(line) for line in lines] == [scenario.model_dump(mode="json")] * 2
    assert imported["families"] == ["submodels"]


def test_the_json_schema_holds_each_config():
    """Asked for, the scenario's JSON schema imports every family: a member per built-in, its config's schema."""
    members = Scenario.model_json_schema()["properties"]["algorithm"]["oneOf"]
    assert [m.get("title") for m in members[:-1]] == [c.__name__ for c in BUILTIN.values()]
    assert members[1] == BUILTIN["fedprox"].model_json_schema() and members[-1] == {"$ref": "#/$defs/PluginAlgorithm"}


def _concrete_configs(module) -> dict[str, type]:
    """name -> config of the classes a family module defines whose name is a Literal (a built-in's)."""
    found = {}
    for cls in vars(module).values():
        if inspect.isclass(cls) and issubclass(cls, AlgorithmConfig) and cls.__module__ == module.__name__:
            name = cls.model_fields.get("name")
            if name is not None and get_origin(name.annotation) is Literal:
                found[get_args(name.annotation)[0]] = cls
    return found


def test_builtin_names_exactly_the_families_configs():
    import importlib

    defined = {}
    for family in FAMILIES:
        defined.update(_concrete_configs(importlib.import_module(f"testbed.schema.algorithms.{family}")))
    assert dict(BUILTIN.items()) == defined   # items() imports every entry
    assert PluginAlgorithm not in defined.values() and len(defined) == 46
