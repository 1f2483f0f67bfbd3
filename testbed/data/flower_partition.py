"""Flower Datasets' partitioners (flwr_datasets.partitioner) on any dataset of the testbed: `data.partition:
{kind: flwr, name: DirichletPartitioner, options: {alpha: 0.5, partition_by: label}}`. Needs the hf extra.

Semantics:
- `name` is a class of flwr_datasets.partitioner (DirichletPartitioner, ShardPartitioner, NaturalIdPartitioner...)
  or a partitioner of one's own as 'package.module:Class' (testbed/plugins.py); `options` are its constructor's
  keyword arguments, checked against its signature.
- The partitioner sees a datasets.Dataset of the training pool with a column `label` (the labels, whatever the
  dataset calls its label column), an index column (how the samples come back as indices), and, where an option
  `partition_by` names another column, that column holding the dataset's clients (Dataset.train_clients: the
  hf loader's `clients` column, a bundled dataset's natural clients). It is called through its public API only:
  `partitioner.dataset = ds; partitioner.load_partition(i)`.
- `num_partitions` is the fleet's size, set here; a user's other value is refused. A partitioner that takes a
  `seed` gets one drawn from the partition stream (build.py's Purpose.PARTITION) where the user gave none, so the
  same scenario seed gives the same partition, and another seed another.
- Partitions map onto devices: as many partitions as devices, partition i is device i; more (NaturalIdPartitioner
  on a column with more ids than devices), `n` of them are drawn with the partition stream as the `natural`
  partition draws clients (partition.draw_clients: only partitions with min_samples_per_client samples are
  eligible; ascending order), so NaturalIdPartitioner on the clients gives our `natural` partition; fewer: refused.
- A device left with fewer than min_samples_per_client samples (Flower allows empty partitions) is refused.
- Every refusal is a PartitionError naming the field below data.partition (`options`, `name`) and the fix. The
  partitioner's warnings (DirichletPartitioner warns at each redraw) are one line on stderr, not one each.
"""
from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np

from testbed.data.partition import check_enough, draw_clients
from testbed.schema.partitioners import PartitionError, check, parameters, partitioner_class

INDEX = "testbed_index"   # the column that carries each sample's index through the partitioner
LABEL = "label"


def partition(labels: np.ndarray, n_clients: int, rng: np.random.Generator, name: str, options: dict[str, Any],
              min_samples: int = 1, clients: np.ndarray | None = None) -> list[np.ndarray]:
    """One sorted index array (into `labels`) per device, from Flower's partitioner `name` with `options`."""
    check(name, options)
    cls = partitioner_class(name)
    takes = parameters(cls)
    options = dict(options)
    if "num_partitions" in takes:
        given = options.setdefault("num_partitions", n_clients)
        if given != n_clients:
            raise PartitionError("options", f"num_partitions {given} is not the fleet's size ({n_clients} devices); "
                                            "remove it: the testbed sets it to the number of devices")
    if "seed" in takes and "seed" not in options:
        options["seed"] = int(rng.integers(2**32))
    check_enough(len(labels), n_clients, min_samples)   # no partitioner can: said before it tries
    try:
        partitioner = cls(**options)
    except Exception as err:  # noqa: BLE001 - its own refusal of these options, in its words
        raise PartitionError("options", f"{name} refused them: {_one_line(err)}") from None
    partitioner.dataset = _table(labels, options.get("partition_by"), clients)
    parts, said = _load(partitioner, name, options, n_clients, min_samples)
    if said:
        print(f"warning: data.partition: {name} warned {len(said)} time{'s' * (len(said) > 1)} while partitioning, "
              f"first: {' '.join(str(said[0].message).split())[:200]}", file=sys.stderr)
    count = len(parts)
    if count > n_clients:
        sizes = np.array([len(p) for p in parts])
        chosen = draw_clients(np.arange(count), sizes, n_clients, rng, min_samples, f"{name} made only {{}} "
                              f"partitions{{}} for {n_clients} devices")
        parts = [parts[i] for i in chosen]
    short = next((i for i, p in enumerate(parts) if len(p) < min_samples), None)
    if short is not None:
        raise PartitionError("options", f"{name} left device {short} with {len(parts[short])} samples, fewer than "
                                        f"data.min_samples_per_client ({min_samples}); change its options (e.g. "
                                        "min_partition_size) or use fewer devices")
    return [np.sort(p) for p in parts]


def _load(partitioner, name: str, options: dict[str, Any], n_clients: int,
          min_samples: int) -> tuple[list[np.ndarray], list]:
    """Every partition's indices, and the warnings given while partitioning (DirichletPartitioner's redraws),
    which the caller says in one line."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            count = partitioner.num_partitions
            if count < n_clients:
                raise PartitionError("options", f"{name} made {count} partitions for {n_clients} devices; use at "
                                                f"most {count} devices")
            parts = [np.asarray(partitioner.load_partition(i)[INDEX], dtype=np.int64) for i in range(count)]
        except PartitionError:
            raise
        except Exception as err:  # noqa: BLE001 - the partitioner's refusal of this data (too few samples...)
            gave_up = "attempts" in str(err) and _gave_up(partitioner, name, options, n_clients, min_samples,
                                                          len(said))
            if gave_up:
                raise PartitionError("options", gave_up) from None
            redrawn = f" (after {len(said)} warnings)" if said else ""
            raise PartitionError("options", f"{name} refused this data{redrawn}: {_one_line(err)}") from None
    return parts, said


def _gave_up(partitioner, name: str, options: dict[str, Any], n_clients: int, min_samples: int,
             draws: int) -> str | None:
    """What to change in the scenario where a partitioner that redraws until every partition has
    min_partition_size samples (DirichletPartitioner) gave up; None for a partitioner without that option.
    Flower's own words ('max number of attempts') name neither the option nor the devices."""
    takes = parameters(type(partitioner))
    if "min_partition_size" not in takes:
        return None
    least = options.get("min_partition_size", takes["min_partition_size"].default)
    samples = len(partitioner.dataset)
    if least * n_clients > samples:
        return (f"{name} cannot give each of {n_clients} devices min_partition_size={least} of {samples} training "
                f"samples, whatever alpha; lower min_partition_size or use at most {samples // least} devices")
    alpha = f" with alpha {options['alpha']}" if "alpha" in options else ""
    tries = f" in {draws} draws" if draws else ""
    lower = (f"lower min_partition_size (as low as data.min_samples_per_client, {min_samples})"
             if min_samples < least else "lower min_partition_size and data.min_samples_per_client")
    return (f"{name}{alpha} over {n_clients} devices ({samples} training samples) could not give every device "
            f"at least min_partition_size={least} samples{tries}; raise alpha, {lower}, or use fewer devices")


def _table(labels: np.ndarray, partition_by: Any, clients: np.ndarray | None):
    """The datasets.Dataset the partitioner reads: index, label and (where asked) the clients column."""
    import datasets

    columns = {INDEX: np.arange(len(labels), dtype=np.int64), LABEL: np.asarray(labels, dtype=np.int64)}
    if isinstance(partition_by, str) and partition_by != LABEL:
        if clients is None:
            raise PartitionError("options", f"partition_by '{partition_by}' is not a column: this dataset has "
                                            f"'{LABEL}' and no clients column (the hf loader carries one named by "
                                            "its option clients)")
        columns[partition_by] = np.asarray(clients)
    return datasets.Dataset.from_dict(columns)


def _one_line(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())}"
