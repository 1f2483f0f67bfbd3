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
    depends_only_on_shapes = True  # one size per model: the engine computes it once

    @property
    def name(self) -> str:
        return {"float32": "fp32", "float16": "fp16"}[self.dtype]

    def nbytes(self, shapes: Shapes) -> int:
        numel = sum(math.prod(shape) for shape in shapes.values())
        return numel * np.dtype(self.dtype).itemsize

    def encode(self, tensors: Tensors) -> bytes:
        flat = [t.detach().reshape(-1).to(torch.float32).numpy() for t in tensors.values()]
        return np.concatenate(flat).astype(_wire(self.dtype)).tobytes()

    def decode(self, payload: bytes, shapes: Shapes) -> dict[str, torch.Tensor]:
        flat = np.frombuffer(payload, dtype=_wire(self.dtype)).astype(np.float32)
        out, offset = {}, 0
        for name, shape in shapes.items():
            size = math.prod(shape)
            out[name] = torch.from_numpy(flat[offset : offset + size].copy()).reshape(shape)
            offset += size
        return out


@dataclass(frozen=True, eq=False)
class UnitMasked:
    """A submodel's payload: the units (rows on dim 0) that a device keeps, and nothing of the others.

    Layout, tensor after tensor in the shapes' order: for a tensor named in `masks`, the keep flag of each of
    its units as a bitmask (ceil(units / 8) bytes, numpy.packbits order, most significant bit first), then
    the kept units' rows, entries as little-endian floats of `dtype`; any other tensor dense. The decoder
    reads the pattern from the payload and returns zeros at the dropped units. One instance per device and
    round (its masks are the device's), so its size is not cached per codec.
    """

    masks: Mapping[str, torch.Tensor]   # weight name -> (units,) bool keep flags
    dtype: str = "float32"
    depends_only_on_shapes = False

    @property
    def name(self) -> str:
        return "masked-" + Dense(self.dtype).name

    def nbytes(self, shapes: Shapes) -> int:
        item = np.dtype(self.dtype).itemsize
        total = 0
        for name, shape in shapes.items():
            numel = math.prod(shape)
            if name in self.masks:
                units = shape[0]
                total += math.ceil(units / 8) + int(self.masks[name].sum()) * (numel // units) * item
            else:
                total += numel * item
        return total

    def encode(self, tensors: Tensors) -> bytes:
        wire, parts = _wire(self.dtype), []
        for name, t in tensors.items():
            t = t.detach().to(torch.float32)
            if name in self.masks:
                keep = self.masks[name].bool()
                parts += [np.packbits(keep.numpy()).tobytes(), t[keep].reshape(-1).numpy().astype(wire).tobytes()]
            else:
                parts.append(Dense(self.dtype).encode({name: t}))
        return b"".join(parts)

    def decode(self, payload: bytes, shapes: Shapes) -> dict[str, torch.Tensor]:
        wire, out, offset = _wire(self.dtype), {}, 0
        for name, shape in shapes.items():
            numel = math.prod(shape)
            if name in self.masks:
                units = shape[0]
                flags = np.frombuffer(payload, np.uint8, math.ceil(units / 8), offset)
                keep = np.unpackbits(flags)[:units].astype(bool)
                offset += len(flags)
                rows = np.zeros((units, numel // units), dtype=np.float32)
                count = int(keep.sum()) * (numel // units)
                rows[keep] = np.frombuffer(payload, wire, count, offset).reshape(-1, numel // units)
                offset += count * wire.itemsize
                out[name] = torch.from_numpy(rows).reshape(shape)
            else:
                size = numel * wire.itemsize
                out |= Dense(self.dtype).decode(payload[offset : offset + size], {name: shape})
                offset += size
        return out


def _wire(dtype: str) -> np.dtype:
    return np.dtype(dtype).newbyteorder("<")


CODECS: dict[str, Dense] = {"fp32": Dense("float32"), "fp16": Dense("float16")}


def transmit(codec: Dense | UnitMasked, tensors: Tensors) -> dict[str, torch.Tensor]:
    """Encode, check the size against the codec's prediction, decode: what the receiver gets."""
    shapes = {name: t.shape for name, t in tensors.items()}
    payload = codec.encode(tensors)
    expected = codec.nbytes(shapes)
    if len(payload) != expected:  # a codec whose prediction is wrong would corrupt the clock
        raise AssertionError(f"codec {codec.name}: encoded {len(payload)} bytes, predicted {expected}")
    return codec.decode(payload, shapes)
