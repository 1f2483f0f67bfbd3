"""The hf loader on tiny datasets in the Hub's formats, read through datasets.load_dataset as a Hub dataset is:
tensors as computed by hand, labels and clients numbered, splits, the cache, the revision a scenario records, and
each refusal in one line."""
import math

import numpy as np
import pytest
import torch
import yaml
from hub_files import femnist_like, hub_scenario, image_folder, image_parquet_folder, images, write_parquet

from testbed import scenario as sc
from testbed.cli import main
from testbed.data.hf import load_hf
from testbed.errors import TestbedError
from testbed.schema import hub

SQRT3 = math.sqrt(3)


def test_parquet_images_are_normalised_with_the_training_mean_and_std(tmp_path):
    """Training pixels 0, 1, 1, 0 and 1, 1, 1, 1 (/255): mean 3/4, std sqrt(3/16); 0 -> -sqrt(3), 1 -> 1/sqrt(3)."""
    d = load_hf(str(image_parquet_folder(tmp_path / "pq")))
    assert d.train_x.dtype == torch.float32 and d.train_x.shape == (2, 1, 2, 2) and d.test_x.shape == (1, 1, 2, 2)
    assert torch.allclose(d.train_x[0, 0], torch.tensor([[-SQRT3, 1 / SQRT3], [1 / SQRT3, -SQRT3]]), atol=1e-6)
    assert torch.allclose(d.train_x[1], torch.full((1, 2, 2), 1 / SQRT3), atol=1e-6)
    assert torch.allclose(d.test_x, torch.full((1, 1, 2, 2), -SQRT3), atol=1e-6)
    assert d.train_y.tolist() == [0, 2] and d.test_y.tolist() == [1]
    assert d.num_classes == 3 and d.train_clients is None and d.problems() == []   # a ClassLabel of three names


def test_an_imagefolder_gives_rgb_channels_each_normalised_on_its_own(tmp_path):
    """Red, green and blue training images: each channel holds 1 once in three, mean 1/3, std sqrt(2)/3."""
    d = load_hf(str(image_folder(tmp_path / "imgs")))
    assert d.train_x.shape == (3, 3, 2, 2) and d.num_classes == 2 and d.train_y.tolist() == [0, 1, 1]
    high, low = (1 - 1 / 3) / (math.sqrt(2) / 3), (0 - 1 / 3) / (math.sqrt(2) / 3)
    assert torch.allclose(d.train_x[0, :, 0, 0], torch.tensor([high, low, low]), atol=1e-6)   # red
    assert torch.allclose(d.test_x[0, :, 1, 1], torch.tensor([high, high, high]), atol=1e-6)  # white


def test_string_labels_in_sorted_order_and_clients_factorised_over_both_splits(tmp_path):
    d = load_hf(str(femnist_like(tmp_path / "fem")), clients="writer_id")
    assert d.num_classes == 3 and d.train_y.tolist() == [1, 0, 2, 0, 1, 2] and d.test_y.tolist() == [1, 0]
    assert d.train_clients.tolist() == [2, 0, 1, 0, 2, 2] and d.test_clients.tolist() == [0, 2]   # w1 w2 w3


def test_a_table_becomes_float_columns_side_by_side_and_integer_labels_give_max_plus_one(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", {"f0": [1.5, 2.0, 3.0, 4.0], "f1": [0, 1, 2, 3],
                                                  "label": [0, 3, 1, 0]})
    d = load_hf(str(path), test_fraction=0.5)
    held = np.sort(np.random.default_rng(0).permutation(4)[:2])    # the fixed hold-out, whatever the scenario seed
    x = np.array([[1.5, 0], [2.0, 1], [3.0, 2], [4.0, 3]], dtype=np.float32)
    assert d.num_classes == 4 and d.train_x.dtype == torch.float32
    assert np.array_equal(d.test_x.numpy(), x[held]) and np.array_equal(d.train_x.numpy(), np.delete(x, held, 0))


def test_a_sequence_column_is_taken_as_it_is(tmp_path):
    path = write_parquet(tmp_path / "s" / "train.parquet", {"x": [[1, 2, 3], [4, 5, 6]], "labels": [1, 0]})
    write_parquet(tmp_path / "s" / "test.parquet", {"x": [[7, 8, 9]], "labels": [1]})
    d = load_hf(str(path.parent))
    assert d.train_x.tolist() == [[1, 2, 3], [4, 5, 6]] and d.test_x.dtype == torch.float32 and d.num_classes == 2


def test_the_second_load_is_a_cache_hit_and_changed_files_a_new_revision(tmp_path, monkeypatch):
    import datasets

    calls = []
    real = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: calls.append(a) or real(*a, **k))
    folder = image_parquet_folder(tmp_path / "pq")
    first = load_hf(str(folder))
    again = load_hf(str(folder))
    assert len(calls) == 1 and torch.equal(first.train_x, again.train_x) and again.num_classes == 3
    before = hub.fingerprint(folder)
    write_parquet(folder / "test-00000-of-00001.parquet", {"image": images(np.full((2, 2), 255)), "label": [2]},
                  {"image": datasets.Image(), "label": datasets.ClassLabel(names=["cat", "dog", "emu"])})
    assert hub.fingerprint(folder) != before and hub.fingerprint(folder).startswith("local-")
    changed = load_hf(str(folder))
    assert len(calls) == 2 and changed.test_y.tolist() == [2]


def test_a_two_round_run_records_the_revision_and_a_changed_file_is_another_scenario(tmp_path, capsys):
    folder = image_parquet_folder(tmp_path / "data")
    raw = hub_scenario("data", partitioner={"name": "IidPartitioner"})   # relative to the scenario's folder
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
    (run,) = (tmp_path / "runs").glob("*/0")
    resolved = yaml.safe_load((run / "scenario.resolved.yaml").read_text())
    assert resolved["data"]["options"] == {"dataset": str(folder), "revision": hub.fingerprint(folder)}
    assert resolved["data"]["partition"] == {"kind": "flwr", "name": "IidPartitioner", "options": {}}
    (folder / "train-00000-of-00001.parquet").write_bytes((folder / "test-00000-of-00001.parquet").read_bytes())
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds a run of another scenario (data.options.revision" in err


def _refusal(raw, base_dir=".") -> str:
    with pytest.raises(TestbedError) as caught:
        sc.build(sc.validate(raw, "s.yaml", base_dir))
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def _with_partition(raw: dict, partition: dict) -> dict:
    raw["data"]["partition"] = partition
    return raw


def test_refusals_are_one_line(tmp_path):
    folder = image_parquet_folder(tmp_path / "pq")
    write_parquet(tmp_path / "sizes" / "train.parquet", {"image": images(np.zeros((2, 2)), np.zeros((3, 3))),
                                                         "label": [0, 1]})
    write_parquet(tmp_path / "sizes" / "test.parquet", {"image": images(np.zeros((2, 2))), "label": [0]})
    only_train = write_parquet(tmp_path / "one.parquet", {"v": [1.0, 2.0], "label": [0, 1]})
    cases = [
        (hub_scenario(folder, revision="local-0000"), "data.options.revision: " + str(folder) + " holds revision"),
        (hub_scenario(tmp_path / "sizes"), "images of different sizes in column 'image' (2x2 and 3x3 pixels)"),
        (hub_scenario(only_train), "no split 'test' (it has: train); name the test split with data.options.test_split"),
        (hub_scenario(folder, label="kind"), "no column 'kind' (data.options.label); it has: image, label"),
        (_with_partition(hub_scenario(folder, partitioner={"name": "IidPartitioner"}), {"kind": "iid"}),
         "data.options.partitioner: give the partitioner once"),
        (hub_scenario(folder, partitioner={"name": "IidPartitioner", "num_partitions": 5}),
         "data.partition.options: num_partitions 5 is not the fleet's size (2 devices)"),
        (hub_scenario("nobody/no-such-dataset"), "data.options.dataset: cannot reach the Hugging Face Hub for "
                                                 "'nobody/no-such-dataset' (no network?) (HF_HUB_OFFLINE is set)"),
    ]
    for raw, expected in cases:
        assert expected in _refusal(raw), expected


def test_without_the_extra_the_loader_says_what_to_install(tmp_path, monkeypatch):
    folder = image_parquet_folder(tmp_path / "pq")
    monkeypatch.setitem(__import__("sys").modules, "datasets", None)
    with pytest.raises(ValueError, match=r'need the hf extra: pip install -e "\.\[hf\]"'):
        load_hf.__wrapped__(str(folder))


class Info:
    sha = "0123abcd" * 5


@pytest.fixture
def online(monkeypatch):
    """The Hub reachable, its answer stubbed: every dataset's main branch is at Info.sha."""
    from huggingface_hub import HfApi, constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(HfApi, "dataset_info", lambda self, name, timeout=None: Info())
    hub.hub_sha.cache_clear()
    yield
    hub.hub_sha.cache_clear()


def test_a_hub_name_resolves_to_the_hubs_sha_online_and_to_the_cached_ref_offline(tmp_path, monkeypatch, online):
    from huggingface_hub import HfApi, constants

    assert sc.validate(hub_scenario("owner/online"), "s").data.options["revision"] == Info.sha

    def unreachable(self, name, timeout=None):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(HfApi, "dataset_info", unreachable)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    ref = tmp_path / "hub" / "datasets--owner--cached" / "refs" / "main"
    ref.parent.mkdir(parents=True)
    ref.write_text("feedbeef" * 5 + "\n")
    hub.hub_sha.cache_clear()
    assert sc.validate(hub_scenario("owner/cached"), "s").data.options["revision"] == "feedbeef" * 5
    message = _refusal(hub_scenario("owner/elsewhere"))
    assert "cannot reach the Hugging Face Hub for 'owner/elsewhere' (no network?) and" in message
    assert sc.validate(hub_scenario("owner/pinned", revision="v1"), "s").data.options["revision"] == "v1"
    hub.hub_sha.cache_clear()


def test_the_example_hub_scenario_validates_where_the_hub_answers(online):
    """examples/hub_cifar10.yaml (docs/data_hub.md) with the Hub's answer stubbed: its revision is resolved and its
    partitioner moved to data.partition."""
    from helpers import ROOT

    data = sc.load(ROOT / "examples" / "hub_cifar10.yaml").data
    assert data.options == {"dataset": "uoft-cs/cifar10", "revision": Info.sha}
    assert data.partition.model_dump() == {"kind": "flwr", "name": "DirichletPartitioner",
                                           "options": {"alpha": 0.5, "partition_by": "label"}}
