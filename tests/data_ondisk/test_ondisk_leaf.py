import numpy as np
import pytest
import torch
from ondisk_files import check_dataset, one_line_error, write_leaf

from testbed.data.leaf import load_femnist, load_shakespeare_leaf
from testbed.data.text import LEAF_LETTERS, VOCAB_SIZE


def image(value: float, at: int | None = None, bright: float = 0.25) -> list[float]:
    """784 pixels of `value`, but `bright` at flat index `at`."""
    pixels = [value] * 784
    if at is not None:
        pixels[at] = bright
    return pixels


@pytest.fixture
def femnist_dir(tmp_path):
    """Train over two files: f_b (1 sample), f_a (2), then f_c (1); test: f_c, f_a, f_d (only in test).
    Client ids in sorted name order: f_a 0, f_b 1, f_c 2, f_d 3."""
    write_leaf(tmp_path / "train" / "all_data_0_train.json",
               {"f_b": ([image(1.0)], [61]), "f_a": ([image(1.0, at=30), image(0.0)], [3, 36])})
    write_leaf(tmp_path / "train" / "all_data_1_train.json", {"f_c": ([image(0.5)], [10])})
    write_leaf(tmp_path / "test" / "all_data_0_test.json",
               {"f_c": ([image(1.0)], [11]), "f_a": ([image(1.0)], [0]), "f_d": ([image(1.0, at=783)], [5])})
    return tmp_path


def test_femnist(femnist_dir):
    d = load_femnist(femnist_dir)
    # samples grouped by user in name order: f_a (2), f_b, f_c
    check_dataset(d, "femnist", 62, (4, 1, 28, 28), (3, 1, 28, 28), [3, 36, 61, 10], [0, 11, 5])
    assert d.train_clients.dtype == np.int64 and d.test_clients.dtype == np.int64
    assert d.train_clients.tolist() == [0, 0, 1, 2] and d.test_clients.tolist() == [0, 2, 3]
    # pixels as LEAF stores them (1.0 the background), flat index 30 = row 1, col 2
    assert d.train_x[0, 0, 1, 2].item() == 0.25 and d.train_x[0, 0, 0, 0].item() == 1.0
    assert d.train_x[3].eq(0.5).all() and d.test_x[2, 0, 27, 27].item() == 0.25


def test_femnist_root_may_be_above_leafs_data_folder(femnist_dir):
    # LEAF writes data/femnist/data/{train,test}: the dataset folder data/femnist works too
    (femnist_dir / "data").mkdir()
    for part in ("train", "test"):
        (femnist_dir / part).rename(femnist_dir / "data" / part)
    assert load_femnist(femnist_dir).train_clients.tolist() == [0, 0, 1, 2]


def window(text: str) -> str:
    return (text * 80)[:80]


@pytest.fixture
def shakespeare_dir(tmp_path):
    write_leaf(tmp_path / "train" / "train.json", {
        "THE_TEMPEST_PROSPERO": ([window("Ab c\n"), window("xyz! ")], ["d", "\n"]),
        "HAMLET_HAMLET": ([window("To be")], ["?"]),
    })
    write_leaf(tmp_path / "test" / "test.json", {"THE_TEMPEST_PROSPERO": ([window("}~")], ["~"])})
    return tmp_path


def test_shakespeare(shakespeare_dir):
    d = load_shakespeare_leaf(shakespeare_dir)
    index = LEAF_LETTERS.index
    # HAMLET_HAMLET sorts first: client 0; '~' is not in LEAF's vocabulary: it becomes the space
    check_dataset(d, "shakespeare_leaf", 80, (3, 80), (1, 80), [index("?"), index("d"), index("\n")],
                  [index(" ")], x_dtype=torch.int64)
    assert VOCAB_SIZE == 80
    assert d.train_clients.tolist() == [0, 1, 1] and d.test_clients.tolist() == [1]
    assert d.train_x[0, :5].tolist() == [index(c) for c in "To be"]
    assert d.train_x[1, :6].tolist() == [index(c) for c in "Ab c\nA"]
    assert d.test_x[0, :2].tolist() == [index("}"), index(" ")]


def test_missing_folder(tmp_path):
    one_line_error(FileNotFoundError, tmp_path / "nope", load_femnist, tmp_path / "nope")


def test_missing_test_folder(femnist_dir):
    for f in (femnist_dir / "test").iterdir():
        f.unlink()
    (femnist_dir / "test").rmdir()
    one_line_error(FileNotFoundError, femnist_dir / "test", load_femnist, femnist_dir)


def test_no_json_files(femnist_dir):
    for f in (femnist_dir / "train").iterdir():
        f.unlink()
    message = one_line_error(FileNotFoundError, femnist_dir / "train", load_femnist, femnist_dir)
    assert "no .json files" in message


def test_malformed_json(femnist_dir):
    path = femnist_dir / "train" / "all_data_1_train.json"
    path.write_text('{"users": ["f_c"], "user_data": {"f_c": {"x": [[0.5, ')
    assert "not valid JSON" in one_line_error(ValueError, path, load_femnist, femnist_dir)


def test_json_without_user_data(femnist_dir):
    path = femnist_dir / "test" / "all_data_0_test.json"
    path.write_text('{"users": [], "num_samples": []}')
    assert 'no "user_data"' in one_line_error(ValueError, path, load_femnist, femnist_dir)


def test_x_and_y_counts_differ(femnist_dir):
    path = write_leaf(femnist_dir / "train" / "all_data_1_train.json", {"f_c": ([image(0.5)], [10, 11])})
    assert "1 x but 2 y" in one_line_error(ValueError, path, load_femnist, femnist_dir)


def test_femnist_image_of_the_wrong_size(femnist_dir):
    path = write_leaf(femnist_dir / "train" / "all_data_1_train.json", {"f_c": ([[0.5] * 783], [10])})
    assert "784 pixels" in one_line_error(ValueError, path, load_femnist, femnist_dir)


def test_femnist_label_out_of_range(femnist_dir):
    path = write_leaf(femnist_dir / "test" / "all_data_0_test.json", {"f_a": ([image(1.0)], [62])})
    assert "outside 0..61" in one_line_error(ValueError, path, load_femnist, femnist_dir)


def test_shakespeare_window_of_the_wrong_length(shakespeare_dir):
    path = write_leaf(shakespeare_dir / "test" / "test.json", {"HAMLET_HAMLET": (["too short"], ["x"])})
    assert "80-character" in one_line_error(ValueError, path, load_shakespeare_leaf, shakespeare_dir)


def test_shakespeare_target_of_two_characters(shakespeare_dir):
    path = write_leaf(shakespeare_dir / "test" / "test.json", {"HAMLET_HAMLET": ([window("a")], ["xy"])})
    assert "one character" in one_line_error(ValueError, path, load_shakespeare_leaf, shakespeare_dir)
