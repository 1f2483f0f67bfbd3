"""Codecs: what a model or an update costs on the wire, measured on the encoded bytes.

Every codec predicts its size from tensor shapes alone (`nbytes`), so the engine can plan a round's clock
before anything is trained, and then checks that the real encoded payload has exactly that size.
Tensors travel in the order of the shapes mapping (the model's parameter order, known to both ends), so a
dense payload carries no header.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
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
    """A submodel's payload: the rows (units, dim 0) and columns (dim 1) that a device keeps, nothing of the others.

    Layout, tensor after tensor in the shapes' order: for a tensor named in `masks`, the keep flag of each row as
    a bitmask (ceil(rows / 8) bytes, numpy.packbits order, most significant bit first); then, for a tensor named
    in `columns`, the keep flag of each column as a bitmask (ceil(columns / 8) bytes); then the kept entries
    t[rows][:, columns] (all trailing dims) as little-endian floats of `dtype`. A tensor may have a row mask, a
    column mask (a classifier reading pruned features) or both; any other tensor is dense. The decoder reads the
    pattern from the payload and returns zeros at the dropped entries. One instance per device and round (its
    masks are the device's), so its size is not cached per codec.
    """

    masks: Mapping[str, torch.Tensor]   # tensor name -> (rows,) bool keep flags
    dtype: str = "float32"
    columns: Mapping[str, torch.Tensor] = field(default_factory=dict)  # tensor name -> (columns,) bool keep flags
    depends_only_on_shapes = False

    @classmethod
    def structured(cls, structure: Mapping[str, tuple[torch.Tensor, torch.Tensor | None]],
                   dtype: str = "float32") -> UnitMasked:
        """The payload of a shrunk network from submodel.structure's (rows, columns) per parameter: a bitmask for
        each dimension that drops something; a tensor that drops nothing travels dense."""
        masks = {name: rows for name, (rows, _) in structure.items() if not rows.all()}
        columns = {name: cols for name, (_, cols) in structure.items() if cols is not None and not cols.all()}
        return cls(masks, dtype, columns)

    @property
    def name(self) -> str:
        return "masked-" + Dense(self.dtype).name

    def _sliced(self, name: str) -> list[tuple[int, torch.Tensor]]:
        """(dim, keep flags) of each dimension of tensor `name` that the payload slices, in wire order."""
        return [(dim, flags[name]) for dim, flags in ((0, self.masks), (1, self.columns)) if name in flags]

    def nbytes(self, shapes: Shapes) -> int:
        total = 0
        for name, shape in shapes.items():
            kept = list(shape)
            for dim, keep in self._sliced(name):
                total += math.ceil(shape[dim] / 8)
                kept[dim] = int(keep.sum())
            total += Dense(self.dtype).nbytes({name: kept})
        return total

    def encode(self, tensors: Tensors) -> bytes:
        parts = []
        for name, t in tensors.items():
            t = t.detach().to(torch.float32)
            for dim, keep in self._sliced(name):
                keep = keep.bool()
                parts.append(np.packbits(keep.numpy()).tobytes())
                t = t[keep] if dim == 0 else t[:, keep]
            parts.append(Dense(self.dtype).encode({name: t}))
        return b"".join(parts)

    def decode(self, payload: bytes, shapes: Shapes) -> dict[str, torch.Tensor]:
        out, offset = {}, 0
        for name, shape in shapes.items():
            kept, kept_shape = [], list(shape)
            for dim, _ in self._sliced(name):
                flags = np.frombuffer(payload, np.uint8, math.ceil(shape[dim] / 8), offset)
                offset += len(flags)
                index = torch.from_numpy(np.flatnonzero(np.unpackbits(flags)[: shape[dim]]))
                kept.append((dim, index))
                kept_shape[dim] = len(index)
            size = Dense(self.dtype).nbytes({name: kept_shape})
            t = Dense(self.dtype).decode(payload[offset : offset + size], {name: kept_shape})[name]
            offset += size
            for dim, index in kept:  # zeros at the dropped rows and columns
                wide = list(t.shape)
                wide[dim] = shape[dim]
                t = torch.zeros(wide).index_copy_(dim, index, t)
            out[name] = t
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
