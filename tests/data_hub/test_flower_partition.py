"""data.partition kind flwr: Flower Datasets' partitioners give the indices Flower's own load_partition gives on the
same data and seed, map onto the fleet's devices (more natural ids than devices drawn as `natural` draws them),
run on the bundled datasets, refuse in one line; the default kinds are as they were."""
import copy
import sys

import numpy as np
import pytest
from helpers import TWO_DEVICES
from hub_files import femnist_like, hub_scenario

from testbed import scenario as sc
from testbed.build import Purpose, stream
from testbed.data.flower_partition import partition
from testbed.data.partition import natural
from testbed.errors import TestbedError
from testbed.schema.partitioners import PartitionError

LABELS = np.random.default_rng(3).integers(0, 10, 600)


def _flowers_own(cls, labels, **options) -> list[list[int]]:
    import datasets

    partitioner = cls(**options)
    partitioner.dataset = datasets.Dataset.from_dict({"label": labels, "i": np.arange(len(labels))})
    return [sorted(partitioner.load_partition(k)["i"]) for k in range(partitioner.num_partitions)]


@pytest.mark.parametrize("name, options", [
    ("DirichletPartitioner", {"alpha": 0.5, "partition_by": "label"}),
    ("ShardPartitioner", {"partition_by": "label", "num_shards_per_partition": 2}),
    ("IidPartitioner", {}),
])
def test_indices_are_flowers_own_on_the_same_data_and_seed(name, options):
    import flwr_datasets.partitioner as flower

    rng = np.random.default_rng(stream(5, Purpose.PARTITION))
    ours = partition(LABELS, 10, rng, name, options)
    takes_seed = "seed" in flower.__dict__[name].__init__.__code__.co_varnames
    seed = {"seed": int(np.random.default_rng(stream(5, Purpose.PARTITION)).integers(2**32))} if takes_seed else {}
    assert [p.tolist() for p in ours] == _flowers_own(flower.__dict__[name], LABELS, num_partitions=10,
                                                      **options, **seed)
    if takes_seed:   # the user's seed is passed as given
        given = partition(LABELS, 10, np.random.default_rng(0), name, {**options, "seed": 11})
        assert [p.tolist() for p in given] == _flowers_own(flower.__dict__[name], LABELS, num_partitions=10,
                                                           **options, seed=11)


def test_natural_id_partitioner_with_more_ids_than_devices_draws_as_natural_does():
    clients = np.array([5, 3, 3, 9, 1, 5, 5, 7, 9, 1, 3, 7])
    labels = np.zeros(12, dtype=np.int64)
    for n, min_samples in [(3, 1), (2, 2), (5, 1)]:
        ours = partition(labels, n, np.random.default_rng(4), "NaturalIdPartitioner", {"partition_by": "writer_id"},
                         min_samples, clients)
        theirs = natural(labels, n, np.random.default_rng(4), clients, min_samples=min_samples)
        assert [p.tolist() for p in ours] == [p.tolist() for p in theirs]
    with pytest.raises(PartitionError, match=r"NaturalIdPartitioner made 5 partitions for 6 devices; use at most 5"):
        partition(labels, 6, np.random.default_rng(4), "NaturalIdPartitioner", {"partition_by": "writer_id"},
                  1, clients)


def test_natural_is_as_it_was():
    """The draw moved into draw_clients; these are the partitions of the code before it (587d439)."""
    clients = np.array([5, 3, 3, 9, 1, 5, 5, 7, 9, 1, 3, 7])
    expected = {(3, 1): [[0, 5, 6], [7, 11], [3, 8]], (2, 2): [[0, 5, 6], [3, 8]],
                (5, 1): [[4, 9], [1, 2, 10], [0, 5, 6], [7, 11], [3, 8]]}
    for (n, min_samples), parts in expected.items():
        got = natural(np.zeros(12, int), n, np.random.default_rng(4), clients, min_samples=min_samples)
        assert [p.tolist() for p in got] == parts
    with pytest.raises(ValueError, match=r"^the dataset has only 2 natural clients with at least 3 training samples; "
                                         r"use at most 2 devices$"):
        natural(np.zeros(12, int), 4, np.random.default_rng(4), clients, min_samples=3)


def test_natural_id_partitioner_on_a_writer_column_equals_the_natural_partition(tmp_path):
    """FEMNIST's layout through the hf loader: three writers, two devices; the scenario's partitioner option."""
    folder = femnist_like(tmp_path / "fem")
    flwr = sc.build(sc.validate(hub_scenario(folder, partitioner={"name": "NaturalIdPartitioner",
                                                                  "partition_by": "writer_id"}), "s"))
    raw = hub_scenario(folder, clients="writer_id")
    raw["data"]["partition"] = {"kind": "natural"}
    ours = sc.build(sc.validate(raw, "s"))
    assert [p.tolist() for p in flwr.clients.train] == [p.tolist() for p in ours.clients.train]
    assert flwr.clients.local_test_sizes().tolist() == ours.clients.local_test_sizes().tolist()


def _mnist5k(partition_section: dict, seed: int = 0) -> dict:
    raw = copy.deepcopy(TWO_DEVICES)
    raw["data"]["partition"] = partition_section
    raw["seed"] = seed
    return raw


def test_flwr_on_the_bundled_mnist5k_is_seeded_by_the_scenario():
    dirichlet = {"kind": "flwr", "name": "DirichletPartitioner", "options": {"alpha": 0.5, "partition_by": "label"}}
    first = sc.build(sc.validate(_mnist5k(dirichlet), "s"))
    labels = first.dataset.train_y.numpy()
    expected = partition(labels, 2, np.random.default_rng(stream(0, Purpose.PARTITION)), "DirichletPartitioner",
                         {"alpha": 0.5, "partition_by": "label"})
    assert [p.tolist() for p in first.clients.train] == [p.tolist() for p in expected]
    assert sum(map(len, first.clients.train)) == len(labels) == 4000
    again = sc.build(sc.validate(_mnist5k(dirichlet), "s"))
    other = sc.build(sc.validate(_mnist5k(dirichlet, seed=1), "s"))
    assert all(np.array_equal(a, b) for a, b in zip(first.clients.train, again.clients.train))
    assert not all(np.array_equal(a, b) for a, b in zip(first.clients.train, other.clients.train))


def test_a_partitioner_of_ones_own(monkeypatch):
    monkeypatch.syspath_prepend(str(__import__("pathlib").Path(__file__).parent))
    exp = sc.build(sc.validate(_mnist5k({"kind": "flwr", "name": "own_partitioner:EveryOther"}), "s"))
    assert [p[:3].tolist() for p in exp.clients.train] == [[0, 2, 4], [1, 3, 5]]


def _refusal(raw) -> str:
    with pytest.raises(TestbedError) as caught:
        sc.build(sc.validate(raw, "s"))
    assert "\n" not in str(caught.value)
    return str(caught.value)


@pytest.mark.parametrize("section, expected", [
    ({"kind": "flwr", "name": "Dirichlet"}, "data.partition.name: unknown partitioner 'Dirichlet'; choose one of "
                                            "flwr_datasets.partitioner's: ContinuousPartitioner, DirichletPartitioner"),
    ({"kind": "flwr", "name": "DirichletPartitioner", "options": {"alfa": 1}},
     "data.partition.options: alfa is not an option of DirichletPartitioner (it takes: num_partitions, partition_by, "
     "alpha, min_partition_size, self_balancing, shuffle, seed)"),
    ({"kind": "flwr", "name": "DirichletPartitioner", "options": {"alpha": 0.5, "partition_by": "writer_id"}},
     "data.partition.options: partition_by 'writer_id' is not a column: this dataset has 'label' and no clients"),
    ({"kind": "flwr", "name": "DirichletPartitioner", "options": {"alpha": -1, "partition_by": "label"}},
     "data.partition.options: DirichletPartitioner refused them: ValueError: Alpha values should be strictly "
     "greater than zero."),
    ({"kind": "flwr", "name": "IidPartitioner", "options": {"num_partitions": 10}},
     "data.partition.options: num_partitions 10 is not the fleet's size (2 devices); remove it"),
    ({"kind": "flwr", "name": "SizePartitioner", "options": {"partition_sizes": [1, 50]}},
     "data.partition.options: SizePartitioner left device 0 with 1 samples, fewer than data.min_samples_per_client "
     "(2)"),
    ({"kind": "flwr", "name": "own_partitioner:Missing"}, "data.partition.name: 'own_partitioner:Missing': "),
])
def test_refusals_are_one_line_naming_the_field(section, expected, monkeypatch):
    monkeypatch.syspath_prepend(str(__import__("pathlib").Path(__file__).parent))
    raw = _mnist5k(section)
    raw["data"]["min_samples_per_client"] = 2
    assert expected in _refusal(raw)


def test_without_the_extra_the_schema_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "flwr_datasets.partitioner", None)
    message = _refusal(_mnist5k({"kind": "flwr", "name": "IidPartitioner"}))
    assert message == 's: data.partition.name: Flower\'s partitioners need the hf extra: pip install -e ".[hf]"'


def test_the_partitioners_warnings_are_one_line(capsys):
    """DirichletPartitioner warns at each redraw; the run says it once, or names the count in its refusal."""
    labels = np.arange(200) % 4
    options = {"alpha": 1.0, "partition_by": "label", "min_partition_size": 12}
    parts = partition(labels, 10, np.random.default_rng(0), "DirichletPartitioner", options | {"seed": 1})
    assert min(map(len, parts)) >= 12
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and said[0].startswith("warning: data.partition: DirichletPartitioner warned 3 times "
                                                 "while partitioning, first: The specified min_partition_size (12)")
    with pytest.raises(ValueError, match=r"^DirichletPartitioner with alpha 1.0 over 10 devices \(200 training "
                                         r"samples\) could not give every device at least min_partition_size=12 "
                                         r"samples in 11 draws; raise alpha"):
        partition(labels, 10, np.random.default_rng(0), "DirichletPartitioner", options | {"seed": 2})
    assert capsys.readouterr().err == ""
