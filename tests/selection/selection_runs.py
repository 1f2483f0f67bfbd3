"""Shared pieces of the selectors' tests: scenarios/fedprox_deadline.yaml run for 3 rounds with a selector, the
registry a run's server builds, who a run selected each round, a resume's tables, and a checkpoint rewritten as an
older testbed wrote it."""
import pandas as pd
import torch
from helpers import ROOT, run_killed_after, simulate, tiny_scenario

from testbed import scenario as sc
from testbed.protocols.kit import Kit
from testbed.runner import run_scenario
from testbed.scenario_file import apply_overrides, read_yaml

DEADLINE = ROOT / "scenarios" / "fedprox_deadline.yaml"
# 3 rounds; a 10 s deadline (its 30 s one binds no round of the first 3: the slowest phones upload in ~16 s);
# one evaluation, of 200 samples, at the end: the run is its training
SHORT = ["stop.max_rounds=3", "round.deadline_s=10", "eval.every_rounds=3", "eval.max_samples=200"]


def deadline_raw(*overrides: str) -> dict:
    return apply_overrides(read_yaml(DEADLINE), [*SHORT, *overrides])


def run_deadline(selection: str, *overrides: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """rounds and events of fedprox_deadline's short run with this selector."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # two threads contend with the other tests for 2 cores
    try:
        records, events = simulate(deadline_raw(f"selection.name={selection}", *overrides))
    finally:
        torch.set_num_threads(threads)
    return pd.DataFrame(records), pd.DataFrame(events)


def registry_of(raw: dict):
    """The registry the server of this scenario builds."""
    return Kit(sc.build(sc.validate(raw, "test", ROOT)), lambda *a: None).participation.registry


def selected_by_round(events: pd.DataFrame) -> dict[int, list[int]]:
    return {int(r): sorted(g.device.unique().tolist()) for r, g in events.groupby("round")}


def resume_keeps_the_tables(selection: dict, round_: dict, out) -> bool:
    """4 rounds of the tests' tiny data on 4 Raspberry Pis and 4 low-end phones with this selection, checkpointed
    every round: whether the run killed after round 2 and resumed ends with the unbroken run's tables."""
    raw = tiny_scenario({"name": "fedavg"}, rounds=4) | {"selection": selection, "round": round_,
                                                         "checkpoint": {"every_rounds": 1}}
    raw["fleet"]["groups"] = [{"profile": "raspberry_pi_4", "count": 4}, {"profile": "phone_low", "count": 4}]
    run_scenario(sc.validate(raw, "test", ROOT), "test", out / "unbroken", quiet=True)
    run_killed_after(raw, out / "broken", 2)
    run_scenario(sc.validate(raw, "test", ROOT), "test", out / "broken", quiet=True, resume=True)
    return all((out / "broken" / "tiny" / "0" / t).read_bytes() == (out / "unbroken" / "tiny" / "0" / t).read_bytes()
               for t in ("rounds.csv", "events.csv"))


def older_checkpoint(path, attributes) -> None:
    """Rewrite a checkpoint's selection entry as an older testbed wrote it, the selector's attributes under
    "selector" (`attributes(state)`: its options and what it had learnt, from the state), and no "state"."""
    fields = torch.load(path, weights_only=False)   # the test's own file
    selection = fields["protocol"]["selection"]
    selection["selector"] = attributes(selection.pop("state"))
    torch.save(fields, path)
