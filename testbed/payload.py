"""Codecs: what a model or an update costs on the wire, measured on the encoded bytes.

Every codec predicts its size from tensor shapes alone (`nbytes`), so the engine can plan a round's clock
before anything is trained, and then checks that the real encoded payload has exactly that size.
Tensors travel in the order of the shapes mapping (the model's parameter order, known to both ends), so a
dense payload carries no header.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import torch

Shapes = Mapping[str, torch.Size]
Tensors = Mapping[str, torch.Tensor]


@dataclass(frozen=True)
class Dense:
    """Every entry as a little-endian float of `dtype` ('float32' or 'float16'); decoded back to float32."""

    dtype: str = "float32"

    @property
    def name(self) -> str:
        return {"float32": "fp32", "float16": "fp16"}[self.dtype]

    def nbytes(self, shapes: Shapes) -> int:
        numel = sum(math.prod(shape) for shape in shapes.values())
        return numel * np.dtype(self.dtype).itemsize

    def encode(self, tensors: Tensors) -> bytes:
        flat = [t.detach().reshape(-1).to(torch.float32).numpy() for t in tensors.values()]
        return np.concatenate(flat).astype(np.dtype(self.dtype).newbyteorder("<")).tobytes()

    def decode(self, payload: bytes, shapes: Shapes) -> dict[str, torch.Tensor]:
        flat = np.frombuffer(payload, dtype=np.dtype(self.dtype).newbyteorder("<")).astype(np.float32)
        out, offset = {}, 0
        for name, shape in shapes.items():
            size = math.prod(shape)
            out[name] = torch.from_numpy(flat[offset : offset + size].copy()).reshape(shape)
            offset += size
        return out


CODECS: dict[str, Dense] = {"fp32": Dense("float32"), "fp16": Dense("float16")}


def transmit(codec: Dense, tensors: Tensors) -> dict[str, torch.Tensor]:
    """Encode, check the size against the codec's prediction, decode: what the receiver gets."""
    shapes = {name: t.shape for name, t in tensors.items()}
    payload = codec.encode(tensors)
    expected = codec.nbytes(shapes)
    if len(payload) != expected:  # a codec whose prediction is wrong would corrupt the clock
        raise AssertionError(f"codec {codec.name}: encoded {len(payload)} bytes, predicted {expected}")
    return codec.decode(payload, shapes)
