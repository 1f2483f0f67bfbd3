"""LEAF's character vocabulary for Shakespeare next-character prediction (leaf/models/utils/language_utils.py).

LEAF maps a character outside the vocabulary to -1 (str.find); we map it to the space instead, so every
index is a valid embedding row.
"""
from __future__ import annotations

import numpy as np

LEAF_LETTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
VOCAB_SIZE = len(LEAF_LETTERS)  # 80
_UNKNOWN = LEAF_LETTERS.index(" ")
_INDEX = np.full(0x110000, _UNKNOWN, dtype=np.int64)
_INDEX[[ord(c) for c in LEAF_LETTERS]] = np.arange(VOCAB_SIZE)


def encode(text: str) -> np.ndarray:
    """Character indices of `text` in LEAF's vocabulary."""
    return _INDEX[np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)]
