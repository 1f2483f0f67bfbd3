"""The run folder's own tables and their columns: rounds.csv and events.csv with what each protocol and resource
adds, battery.csv and links.csv; and the files a run writes, which no plugin's table may replace (contracts.py).
Here, below the contracts that refuse those names and the run log that writes the tables (runlog.py)."""
from __future__ import annotations

ROUND_COLUMNS = ["round", "t_start_s", "t_end_s", "online", "selected", "arrived", "dropped", "late", "surplus",
                 "bytes_up", "bytes_down", "flops", "wasted_flops", "wasted_bytes", "server_flops", "train_loss",
                 "accuracy", "loss", "local_accuracy", "local_accuracy_p10"]
EVENT_COLUMNS = ["device", "round", "phase", "start_s", "end_s", "outcome", "ratio"]
# An asynchronous run adds, per aggregation, the updates discarded as too stale, the tasks cut at the run's end
# and the staleness of the aggregated updates; per phase, its task (numbered in order of dispatch: a device may
# end two tasks between aggregations), the model version the task downloaded and its update's staleness at arrival.
ASYNC_COLUMNS = {"rounds.csv": ["stale", "unfinished", "staleness_mean", "staleness_max"],
                 "events.csv": ["task", "version", "staleness"]}

# Hierarchical aggregation (protocols/hierarchical.py) adds, per cloud round, the edge rounds its edges played and
# the bytes over the backhaul each way; per phase, the edge it belongs to (-2 - its cell) and the edge round of a
# device's task (empty on an edge's backhaul rows).
HIERARCHICAL_COLUMNS = {"rounds.csv": ["edge_rounds", "backhaul_bytes_down", "backhaul_bytes_up"],
                        "events.csv": ["edge", "edge_round"]}

# Resources add columns only where the scenario models them (testbed/resources/): each phase's joules and each
# round's (wasted: of cut tasks); online devices kept out by memory or by battery, tasks dropped by an empty
# battery; and battery.csv, each group's battery levels at the end of every round.
ENERGY_COLUMNS = {"rounds.csv": ["energy_J", "wasted_energy_J"], "events.csv": ["energy_J"]}
MEMORY_COLUMNS = {"rounds.csv": ["excluded_memory"]}
BATTERY_COLUMNS = {"rounds.csv": ["excluded_battery", "depleted"]}
# Shared links (network:) add, per round, the seconds its transfers waited on them in all, the most one task waited
# and the bytes of the transfers that waited; per phase, its wait; and links.csv, each link's summed rate over time.
NETWORK_COLUMNS = {"rounds.csv": ["network_wait_s", "network_wait_max_s", "contended_bytes"],
                   "events.csv": ["waited_s"]}
LINKS_TABLE = ["round", "link", "direction", "capacity_Bps", "t_start_s", "t_end_s", "Bps"]
BATTERY_TABLE = ["round", "t_s", "group", "profile", "level_mean", "level_min", "level_max", "below_min"]
# metrics.csv: what a strategy's aggregate returns besides the metrics rounds.csv records (train_loss, server_flops)
# and its tables, one row a metric and round (aggregation): FedDUMAP's server_alpha, a plugin's own numbers.
METRICS_TABLE = ["round", "metric", "value"]


def tables(scenario) -> dict[str, list[str]]:
    """The run's tables and their columns, in the order of a round's rows."""
    extras = [extra for extra, on in ((ASYNC_COLUMNS, scenario.protocol.kind == "async"),
                                      (HIERARCHICAL_COLUMNS, scenario.protocol.kind == "hierarchical"),
                                      (ENERGY_COLUMNS, scenario.energy_on), (MEMORY_COLUMNS, scenario.memory_on),
                                      (BATTERY_COLUMNS, scenario.batteries_on),
                                      (NETWORK_COLUMNS, scenario.network is not None)) if on]
    out = {name: columns + [c for extra in extras for c in extra.get(name, [])] for name, columns in
           (("rounds.csv", ROUND_COLUMNS), ("events.csv", EVENT_COLUMNS))}
    return (out | {"metrics.csv": METRICS_TABLE} | ({"battery.csv": BATTERY_TABLE} if scenario.batteries_on else {})
            | ({"links.csv": LINKS_TABLE} if scenario.network is not None else {}))


# The files of a run folder: a strategy's metrics["tables"] writes files of other names only.
OWN_FILES = ("rounds.csv", "events.csv", "metrics.csv", "battery.csv", "links.csv", "devices.csv", "summary.json",
             "scenario.resolved.yaml", "checkpoint.pt", "error.log")
# The metrics a strategy's aggregate returns that rounds.csv records (the rest of its columns are the run's own);
# any other goes to metrics.csv.
STRATEGY_METRICS = ("train_loss", "server_flops")


def extra_metric_rows(r: int, metrics: dict) -> list[dict]:
    """metrics.csv's rows of round (aggregation) r: each metric rounds.csv does not record, in the order given."""
    return [{"round": r, "metric": name, "value": value} for name, value in metrics.items()
            if name not in STRATEGY_METRICS and name != "tables"]


# rounds.csv's columns under any protocol and resource, which a strategy's metric may not be named
RESERVED_METRICS = frozenset(ROUND_COLUMNS).union(
    *(extra.get("rounds.csv", []) for extra in (ASYNC_COLUMNS, HIERARCHICAL_COLUMNS, ENERGY_COLUMNS, MEMORY_COLUMNS,
                                                  BATTERY_COLUMNS, NETWORK_COLUMNS))) - set(STRATEGY_METRICS)
