"""The package's layers, bottom to top (README, "Layout"): a module imports only from its own layer and those
below it, and no two folders import each other. Every import counts, a function's own included: an `ast` walk
of every file, no exception list. Code below reaches code above only through testbed/names.py's registries
('module:attribute' references imported where first looked up), as a scenario names user code."""
import ast
from collections import defaultdict
from pathlib import Path

import pytest

from helpers import ROOT

PACKAGE = ROOT / "testbed"
LAYERS = [
    # foundations: errors, names and references, the clock's vocabulary, FLOPs, update rules, codecs, models,
    # device selection rules, the network's solvers
    ["errors", "paths", "version", "names", "columns", "migrations", "plugins", "hooks", "safe_load", "provenance", "clock", "flops",
     "functional", "rules", "staleness", "payload", "store", "degenerate", "models", "memory", "submodel", "selection",
     "network"],
    # the scenario as plain data, and reading it from a file
    ["schema", "scenario_file"],
    # the world a run simulates: datasets, device resources, local training, the latency clock
    ["data", "resources", "local", "latency"],
    # the server's algorithms, the plugins' contracts, checkpoints, and the executors that train
    ["algorithms", "strategies", "contracts", "checkpoint", "execution"],
    # one run's parts, as the composition root hands them over
    ["experiment"],
    # the protocols on the simulated clock
    ["protocols"],
    # the composition root (and validation, which asks what it builds), and the engine that plays a protocol
    ["build", "validation", "scenario", "engine"],
    # runs, their folders, sweeps, trackers and the user's entry points
    ["runlog", "trackers", "progress", "runner", "parallel", "sweeps", "api", "cli", "__main__", "__init__"],
]
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}


def modules() -> dict[str, Path]:
    return {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
            for p in PACKAGE.rglob("*.py")}


def imported(module: str, path: Path, known: dict) -> set[str]:
    """The testbed modules `module` imports, anywhere in its file ('testbed' itself: the package's root)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            # `from package import name`: the submodule where there is one, else the package's own attribute
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name.startswith("testbed") and name != module:
                found.add(name)
    return found


def top(module: str) -> str:
    """The package's top-level module or folder `module` belongs to ('__init__' for the package itself)."""
    return module.split(".")[1] if "." in module else "__init__"


def test_every_module_has_a_layer():
    assert sorted({top(m) for m in modules()} - set(LAYER)) == []


def test_no_import_points_up_a_layer():
    known = modules()
    upward = sorted(f"{m} -> {t}" for m, p in known.items() for t in imported(m, p, known)
                    if LAYER[top(t)] > LAYER[top(m)])
    assert upward == []


def test_no_two_folders_import_each_other():
    known = modules()
    folders = defaultdict(set)
    for m, p in known.items():
        for t in imported(m, p, known):
            if top(t) != top(m) and top(t) != "__init__":
                folders[top(m)].add(top(t))
    loops = sorted(f"{a} <-> {b}" for a in folders for b in folders[a] if a < b and a in folders.get(b, ()))
    assert loops == []


def test_the_readme_layout_lists_the_layers_in_order():
    """README's layout is the map a newcomer reads: the same layers, top to bottom, a line a module or folder."""
    block = (ROOT / "README.md").read_text().split("## Layout", 1)[1].split("```")[1]
    groups, entries = [], {}
    for line in block.splitlines():
        if line and not line.startswith(" "):
            groups.append(line)
        elif line.startswith("  testbed/"):
            name = line.split()[0].removeprefix("testbed/").removesuffix("/").removesuffix(".py")
            entries.setdefault(len(groups) - 1, set()).add(name)
    assert [entries.get(i, set()) for i in range(len(LAYERS))] == \
        [set(layer) - {"__main__"} for layer in reversed(LAYERS)]


VIEWS = {"sync": "SyncKit", "asynchronous": "AsyncKit", "hierarchical": "HierarchicalKit"}


def _members(name: str, classes: dict[str, ast.ClassDef]) -> set[str]:
    """A kit view's members: its annotations and methods, and its bases' among the views."""
    cls = classes[name]
    own = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)} | \
          {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    return own.union(*(_members(b.id, classes) for b in cls.bases if isinstance(b, ast.Name) and b.id in classes))


@pytest.mark.parametrize("protocol", sorted(VIEWS))
def test_a_protocol_touches_only_what_its_kit_view_declares(protocol):
    """Each protocol's signature says what it touches of the kit (protocols/kit.py's Parts and its own view):
    every `kit.<name>` in its module is declared there, and every name declared there is used."""
    classes = {node.name: node for module in ("kit", *VIEWS) for node in ast.walk(ast.parse(
        (PACKAGE / "protocols" / f"{module}.py").read_text())) if isinstance(node, ast.ClassDef)}
    used = {node.attr for node in ast.walk(ast.parse((PACKAGE / "protocols" / f"{protocol}.py").read_text()))
            if isinstance(node, ast.Attribute) and (
                (isinstance(node.value, ast.Name) and node.value.id == "kit") or
                (isinstance(node.value, ast.Attribute) and node.value.attr == "kit"))}
    declared = _members(VIEWS[protocol], classes)
    assert (sorted(used - declared), sorted(declared - used)) == ([], [])
