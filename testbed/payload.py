"""Codecs: what a model or an update costs on the wire, measured on the encoded bytes.

Every codec predicts its size from tensor shapes alone (`nbytes`), so the engine can plan a round's clock
before anything is trained, and then checks that the real encoded payload has exactly that size.
Tensors travel in the order of the shapes mapping (the model's parameter order, known to both ends), so a
dense payload carries no header.

Multi-part payloads. An update may carry several tensors per model parameter (FedAdam: the model and both
moments). The tensors form one flat dict whose key is `name` for the part "" and "<part>:<name>" for a part
named <part> (e.g. "m:conv1.weight", "v:conv1.weight"). A codec's `parts` lists them in wire order; `nbytes`,
`nbits` and `decode` always receive the MODEL's parameter shapes (no prefixes) and account for every part, and
parts travel one after the other (part-major), each in the model's parameter order.

Bit-counted codecs (TopK, IntegerDelta, Sign) also give `nbits`, the count the papers charge; their few
bit-level sections are packed most significant bit first (numpy.packbits order) into one stream that is
zero-padded to a whole byte at its end, so nbytes = ceil(nbits / 8) (every float section is whole bytes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Union

import numpy as np
import torch

from testbed import names

Shapes = Mapping[str, torch.Size]
Tensors = Mapping[str, torch.Tensor]


@dataclass(frozen=True)
class Dense:
    """Every entry as a little-endian float of `dtype` ('float32' or 'float16'); decoded back to float32.

    `parts` ("" = the plain parameter name, "m" = "m:<name>", ...) travel one after the other, each in the
    model's order: Dense(parts=("", "m", "v")) is FedAdam's uplink (model, first and second moment), 3*d*q bits.
    """

    dtype: str = "float32"
    parts: tuple[str, ...] = ("",)
    depends_only_on_shapes = True  # one size per model: the engine computes it once

    def __post_init__(self):
        _check_parts(self.parts)
        _check_float(self.dtype)

    @property
    def name(self) -> str:
        base = {"float32": "fp32", "float16": "fp16"}[self.dtype]
        return base if self.parts == ("",) else f"{base}x{len(self.parts)}"

    def nbytes(self, shapes: Shapes) -> int:
        return _numel(shapes) * np.dtype(self.dtype).itemsize * len(self.parts)

    def nbits(self, shapes: Shapes) -> int:
        return 8 * self.nbytes(shapes)

    def encode(self, tensors: Tensors) -> bytes:
        names = _names(tensors, self.parts[0])
        flat = [flatten_part(tensors, part, names) for part in self.parts]
        return np.concatenate(flat).astype(_wire(self.dtype)).tobytes()

    def decode(self, payload: bytes, shapes: Shapes) -> dict[str, torch.Tensor]:
        flat = np.frombuffer(payload, dtype=_wire(self.dtype)).astype(np.float32)
        return unflatten_parts(flat, shapes, self.parts)


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

    def nbits(self, shapes: Shapes) -> int:
        return 8 * self.nbytes(shapes)

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


@dataclass(frozen=True)
class TopK:
    """Top-k sparsification over the whole flattened model (FedAdam-SSM, FedAdam-Top and their variants).

    d = number of model entries (all parameters, flattened and concatenated in the model's order: the papers
    treat the parameters as one vector w in R^d, spec A4, so the top-k is global, not per tensor) and
    k = max(1, floor(fraction * d)) (spec A4: k = floor(alpha * d); a float product within 1e-9 (relative) of
    an integer counts as that integer, so 0.29 * 100 = 28.999999999999996 gives 29, not 28). Per part, the k
    entries of largest |x| are sent (ties: torch.topk's choice) and the decoder puts zeros elsewhere.

    - shared_mask=True (FedAdam-SSM): ONE position set, the top-k of |part `select_by`| (default: the first
      part, the model update), and one length-k value vector per part (3kq + positions bits for 3 parts).
      `select_by` may name another part (FedAdam-SSM_M: "m", SSM_V: "v"), or a part that is not in `parts`:
      then "<select_by>:<name>" tensors are read as selection scores and not sent (e.g. Fairness-top, whose
      rule is the algorithm's: it passes a score that is 1 on its chosen entries and 0 elsewhere).
    - shared_mask=False (FedAdam-Top): each part picks its own top-k, and sends its own positions.

    Positions: the cheaper of a d-bit bitmask and k indices of ceil(log2 d) bits each, as the paper counts it
    (Sec. VII-A: min{N(3kq+d), Nk(3q+log2 d)} with log2 d rounded up; on a tie, the bitmask). The choice
    follows from the shapes alone, so the payload carries no flag and the size is cached per model.

    Layout: all position sections first, as one bit stream (per section, in part order: the bitmask of the d
    entries, or the k indices in increasing order as unsigned ceil(log2 d)-bit integers; most significant bit
    first), zero-padded to a whole byte at its end; then, part after part, the k kept values (in increasing
    position order) as little-endian floats of `dtype`. nbits = masks * min(d, k*ceil(log2 d)) + parts * k * q
    (the paper's count); nbytes = ceil(nbits / 8), the position stream's padding being the only overhead.
    """

    fraction: float
    parts: tuple[str, ...] = ("",)
    dtype: str = "float32"
    shared_mask: bool = True
    select_by: str | None = None
    depends_only_on_shapes = True

    def __post_init__(self):
        _check_parts(self.parts)
        _check_float(self.dtype)
        if not 0 < self.fraction <= 1:
            raise ValueError(f"TopK: fraction must be in (0, 1], got {self.fraction}")
        if self.select_by is not None and not self.shared_mask:
            raise ValueError("TopK: select_by picks the one shared mask; it needs shared_mask=True")

    @property
    def name(self) -> str:
        kind = "ssm" if self.shared_mask else "top"
        return f"{kind}{self.fraction:g}-" + Dense(self.dtype, self.parts).name

    def k(self, d: int) -> int:
        """Kept entries per part out of d: max(1, floor(fraction * d)), at most d."""
        x = float(self.fraction) * d
        k = round(x) if abs(x - round(x)) <= 1e-9 * max(1.0, x) else math.floor(x)
        return min(d, max(1, k))

    @staticmethod
    def index_bits(d: int) -> int:
        """ceil(log2 d), the width of one index into d entries (0 for d = 1)."""
        return (d - 1).bit_length()

    def uses_indices(self, d: int) -> bool:
        """Whether k indices are strictly cheaper than a d-bit bitmask."""
        return self.k(d) * self.index_bits(d) < d

    def _masks(self) -> int:
        return 1 if self.shared_mask else len(self.parts)

    def _position_bits(self, d: int) -> int:
        return self._masks() * min(d, self.k(d) * self.index_bits(d))

    def nbits(self, shapes: Shapes) -> int:
        d = _numel(shapes)
        return self._position_bits(d) + len(self.parts) * self.k(d) * 8 * np.dtype(self.dtype).itemsize

    def nbytes(self, shapes: Shapes) -> int:
        d = _numel(shapes)
        return math.ceil(self._position_bits(d) / 8) + len(self.parts) * self.k(d) * np.dtype(self.dtype).itemsize

    def _select(self, score: np.ndarray, k: int) -> np.ndarray:
        """Positions of the k entries of largest |score|, in increasing order."""
        top = torch.topk(torch.from_numpy(np.abs(score)), k, sorted=False).indices.numpy()
        return np.sort(top)

    def encode(self, tensors: Tensors) -> bytes:
        names = _names(tensors, self.parts[0])
        flat = [flatten_part(tensors, part, names) for part in self.parts]
        d = len(flat[0])
        k = self.k(d)
        if self.shared_mask:
            by = self.parts[0] if self.select_by is None else self.select_by
            score = flat[self.parts.index(by)] if by in self.parts else flatten_part(tensors, by, names)
            positions = [self._select(score, k)] * len(self.parts)
        else:
            positions = [self._select(x, k) for x in flat]
        sections = positions[:1] if self.shared_mask else positions
        if self.uses_indices(d):
            header = _pack_uints(np.concatenate(sections), self.index_bits(d))
        else:
            bits = np.zeros((len(sections), d), dtype=bool)
            for row, index in zip(bits, sections):
                row[index] = True
            header = np.packbits(bits.reshape(-1)).tobytes()
        values = [x[index].astype(_wire(self.dtype)).tobytes() for x, index in zip(flat, positions)]
        return header + b"".join(values)

    def decode(self, payload: bytes, shapes: Shapes) -> dict[str, torch.Tensor]:
        d = _numel(shapes)
        k, masks = self.k(d), self._masks()
        header = np.frombuffer(payload, np.uint8, math.ceil(self._position_bits(d) / 8))
        if self.uses_indices(d):
            sections = list(_unpack_uints(header, masks * k, self.index_bits(d)).reshape(masks, k))
        else:
            bits = np.unpackbits(header)[: masks * d].reshape(masks, d)
            sections = [np.flatnonzero(row) for row in bits]
        if any(len(index) != k or (len(index) and index.max() >= d) for index in sections):
            raise ValueError(f"codec {self.name}: corrupt positions (expected {k} of {d} entries per section)")
        if self.shared_mask:
            sections = sections * len(self.parts)
        itemsize, offset, flat = np.dtype(self.dtype).itemsize, len(header), []
        for index in sections:
            x = np.zeros(d, dtype=np.float32)
            x[index] = np.frombuffer(payload, _wire(self.dtype), k, offset)
            offset += k * itemsize
            flat.append(x)
        return unflatten_parts(np.concatenate(flat), shapes, self.parts)


@dataclass(frozen=True)
class IntegerDelta:
    """FedLion's uplink: the integer-valued local delta Delta = sum of the E local sign steps (entries in
    [-E, E]) at b = ceil(log2(2E + 1)) bits per entry, plus full-precision dense parts (the local momentum,
    "m:<name>"), paper Sec. 2.1: "an integer-valued vector and a full-precision vector", (b + 32) * d bits
    (E = 5, 10, 20: 36, 37, 38 bits per parameter).

    The first part (the plain names) is the integer delta: it must hold exact integers in [-E, E] (the sum of the
    signs, not (x_prev - x) / lr recomputed in floating point), else encode raises ValueError.

    Layout: Delta + E of every entry, model order, as an unsigned b-bit integer, most significant bit first, the
    whole section zero-padded to a byte at its end; then each dense part as little-endian floats of `dtype`.
    nbits = d * b + d * q * len(dense_parts); nbytes = ceil(d * b / 8) + d * (q / 8) * len(dense_parts).
    """

    local_steps: int
    dense_parts: tuple[str, ...] = ("m",)
    dtype: str = "float32"
    depends_only_on_shapes = True

    def __post_init__(self):
        if int(self.local_steps) != self.local_steps or self.local_steps < 1:
            raise ValueError(f"IntegerDelta: local_steps must be a positive integer, got {self.local_steps}")
        _check_parts(self.parts)
        _check_float(self.dtype)

    @property
    def parts(self) -> tuple[str, ...]:
        return ("",) + tuple(self.dense_parts)

    @property
    def bits_per_entry(self) -> int:
        """ceil(log2(2E + 1)): the width of one integer in [-E, E]."""
        return (2 * int(self.local_steps)).bit_length()

    @property
    def name(self) -> str:
        return f"int{self.bits_per_entry}" + "".join(f"+{Dense(self.dtype).name}" for _ in self.dense_parts)

    def _dense(self) -> Dense:
        return Dense(self.dtype, tuple(self.dense_parts))

    def nbits(self, shapes: Shapes) -> int:
        return _numel(shapes) * self.bits_per_entry + (self._dense().nbits(shapes) if self.dense_parts else 0)

    def nbytes(self, shapes: Shapes) -> int:
        ints = math.ceil(_numel(shapes) * self.bits_per_entry / 8)
        return ints + (self._dense().nbytes(shapes) if self.dense_parts else 0)

    def encode(self, tensors: Tensors) -> bytes:
        names = _names(tensors, "")
        delta, e = flatten_part(tensors, "", names), int(self.local_steps)
        as_int = np.rint(delta)
        if not (np.array_equal(as_int, delta) and np.abs(as_int).max(initial=0) <= e):
            raise ValueError(f"codec {self.name}: the delta must hold integers in [-{e}, {e}] (the sum of the "
                             f"local signs); got values in [{delta.min(initial=0)}, {delta.max(initial=0)}]"
                             + ("" if np.array_equal(as_int, delta) else ", not all integers"))
        ints = _pack_uints((as_int + e).astype(np.int64), self.bits_per_entry)
        dense = [flatten_part(tensors, part, names) for part in self.dense_parts]  # in the integer part's order
        return ints + (np.concatenate(dense).astype(_wire(self.dtype)).tobytes() if dense else b"")

    def decode(self, payload: bytes, shapes: Shapes) -> dict[str, torch.Tensor]:
        d = _numel(shapes)
        size = math.ceil(d * self.bits_per_entry / 8)
        ints = _unpack_uints(np.frombuffer(payload, np.uint8, size), d, self.bits_per_entry)
        out = unflatten_parts((ints - int(self.local_steps)).astype(np.float32), shapes, ("",))
        if self.dense_parts:
            out |= self._dense().decode(payload[size:], shapes)
        return out


@dataclass(frozen=True)
class Sign:
    """1-bit sign compression (signSGD, 1-bit Adam, Efficient Adam baselines): one bit per entry plus, with
    `scale`, one float32 scale per tensor (and part), decoded to sign * scale (without `scale`: to +-1).

    scale = mean |x| over the tensor ("mean_abs", the default) or ||x||_2 / sqrt(numel) ("rms", 1-bit Adam's
    C(x)). The bit is 1 for a negative entry and 0 otherwise, so a zero decodes to +scale.

    Layout: the scales first, float32 little-endian, part after part, tensor after tensor in the model's order;
    then the sign bits of every entry (same order) as one bit stream, most significant bit first, zero-padded to
    a byte at its end. nbits = parts * (d + 32 * tensors); nbytes = 4 * parts * tensors + ceil(parts * d / 8).
    """

    scale: bool = True
    parts: tuple[str, ...] = ("",)
    norm: str = "mean_abs"
    depends_only_on_shapes = True

    def __post_init__(self):
        _check_parts(self.parts)
        if self.norm not in ("mean_abs", "rms"):
            raise ValueError(f"Sign: norm must be 'mean_abs' or 'rms', got {self.norm!r}")

    @property
    def name(self) -> str:
        return "sign" + ("" if not self.scale else "+scale" if self.norm == "mean_abs" else "+rms")

    def _scales(self, shapes: Shapes) -> int:
        return len(shapes) * len(self.parts) if self.scale else 0

    def nbits(self, shapes: Shapes) -> int:
        return len(self.parts) * _numel(shapes) + 32 * self._scales(shapes)

    def nbytes(self, shapes: Shapes) -> int:
        return 4 * self._scales(shapes) + math.ceil(len(self.parts) * _numel(shapes) / 8)

    def encode(self, tensors: Tensors) -> bytes:
        names = _names(tensors, self.parts[0])
        scales, signs = [], []
        for part in self.parts:
            for name in names:
                x = tensors[part_key(part, name)].detach().reshape(-1).to(torch.float32).numpy()
                if self.scale and not len(x):
                    scales.append(0.0)
                elif self.scale:
                    x64 = x.astype(np.float64)
                    scales.append(np.abs(x64).mean() if self.norm == "mean_abs" else np.sqrt(np.square(x64).mean()))
                signs.append(x < 0)
        head = np.asarray(scales, dtype=_wire("float32")).tobytes()
        return head + np.packbits(np.concatenate(signs) if signs else np.zeros(0, bool)).tobytes()

    def decode(self, payload: bytes, shapes: Shapes) -> dict[str, torch.Tensor]:
        d, n = _numel(shapes), self._scales(shapes)
        scales = np.frombuffer(payload, _wire("float32"), n).astype(np.float32)
        negative = np.unpackbits(np.frombuffer(payload, np.uint8, offset=4 * n))[: len(self.parts) * d].astype(bool)
        flat = np.where(negative, np.float32(-1), np.float32(1))
        if self.scale:
            sizes = np.array([math.prod(s) for s in shapes.values()] * len(self.parts), dtype=np.int64)
            flat = flat * np.repeat(scales, sizes)
        return unflatten_parts(flat.astype(np.float32), shapes, self.parts)


Codec = Union[Dense, UnitMasked, TopK, IntegerDelta, Sign]


def part_of(key: str) -> str:
    """The part a payload key belongs to: "m" for "m:<name>", "" for a plain parameter name."""
    return key.partition(":")[0] if ":" in key else ""


def part_key(part: str, name: str) -> str:
    """The dict key of parameter `name`'s tensor in part `part`: the plain name for part ""."""
    return name if part == "" else f"{part}:{name}"


def _names(tensors: Tensors, first: str) -> list[str]:
    """The model's parameter names, in the tensors' order, read from the keys of the part `first`."""
    if first == "":
        return [key for key in tensors if ":" not in key]
    prefix = first + ":"
    return [key[len(prefix):] for key in tensors if key.startswith(prefix)]


def flatten_part(tensors: Tensors, part: str, names: list[str]) -> np.ndarray:
    """Part `part` of every parameter, flattened and concatenated in the order of `names`, as float32."""
    flat = [tensors[part_key(part, name)].detach().reshape(-1).to(torch.float32).numpy() for name in names]
    return np.concatenate(flat) if flat else np.zeros(0, np.float32)


def unflatten_parts(flat: np.ndarray, shapes: Shapes, parts: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """The inverse of part-major flattening: {key: tensor} for every part and parameter."""
    out, offset = {}, 0
    for part in parts:
        for name, shape in shapes.items():
            size = math.prod(shape)
            out[part_key(part, name)] = torch.from_numpy(flat[offset : offset + size].copy()).reshape(shape)
            offset += size
    if offset != len(flat):
        raise ValueError(f"payload holds {len(flat)} entries, the shapes {offset}")
    return out


def _numel(shapes: Shapes) -> int:
    return sum(math.prod(shape) for shape in shapes.values())


def _check_parts(parts: tuple[str, ...]) -> None:
    if not parts or len(set(parts)) != len(parts) or any(":" in p for p in parts):
        raise ValueError(f"parts must be distinct names without ':', at least one, got {parts!r}")


def _check_float(dtype: str) -> None:
    if dtype not in ("float32", "float16"):
        raise ValueError(f"dtype must be 'float32' or 'float16', got {dtype!r}")


_CHUNK = 1 << 16  # entries per step of the bit packers: a multiple of 8, so each step fills whole bytes


def _pack_uints(values: np.ndarray, width: int) -> bytes:
    """Non-negative integers below 2**width as `width` bits each, most significant first, zero-padded to a byte."""
    if width == 0:
        return b""
    shifts = np.arange(width - 1, -1, -1, dtype=np.uint64)
    out = []
    for start in range(0, len(values), _CHUNK):
        chunk = values[start : start + _CHUNK].astype(np.uint64)
        out.append(np.packbits(((chunk[:, None] >> shifts) & 1).astype(np.uint8).reshape(-1)).tobytes())
    return b"".join(out)


def _unpack_uints(packed: np.ndarray, n: int, width: int) -> np.ndarray:
    """The first n `width`-bit unsigned integers of a _pack_uints stream, as int64."""
    if width == 0:
        return np.zeros(n, np.int64)
    weights = np.left_shift(np.int64(1), np.arange(width - 1, -1, -1, dtype=np.int64))
    out = []
    step = _CHUNK * width // 8  # bytes per chunk
    for i, start in enumerate(range(0, n, _CHUNK)):
        count = min(_CHUNK, n - start)
        bits = np.unpackbits(packed[i * step : i * step + math.ceil(count * width / 8)])[: count * width]
        out.append(bits.reshape(count, width).astype(np.int64) @ weights)
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def _wire(dtype: str) -> np.dtype:
    return np.dtype(dtype).newbyteorder("<")


FP32, FP16 = Dense("float32"), Dense("float16")
CODECS = names.CODECS   # {"fp32": FP32, "fp16": FP16}, imported where first looked up


def model_shapes(codec: Codec, tensors: Tensors) -> dict[str, torch.Size]:
    """The model's parameter shapes read from a payload's tensors: those of the codec's first part."""
    first = getattr(codec, "parts", ("",))[0]
    return {name: tensors[part_key(first, name)].shape for name in _names(tensors, first)}


def transmit(codec: Codec, tensors: Tensors, shapes: Shapes | None = None) -> dict[str, torch.Tensor]:
    """Encode, check the size against the codec's prediction, decode: what the receiver gets.

    `shapes` are the MODEL's parameter shapes (no part prefixes), as the engine plans the clock with; by default
    they are read from the tensors of the codec's first part (the plain names for a single-part payload)."""
    if shapes is None:
        shapes = model_shapes(codec, tensors)
    if isinstance(codec, Dense) and codec.dtype == "float32":
        return _transmit_float32(codec, tensors, shapes)   # on whichever device the tensors are
    device = next((t.device for t in tensors.values()), None)
    if device is not None and device.type != "cpu":   # the crossing: a codec encodes to bytes on the host
        decoded = transmit(codec, {k: t.cpu() for k, t in tensors.items()}, shapes)
        return {k: t.to(device) for k, t in decoded.items()}
    payload = codec.encode(tensors)
    expected = codec.nbytes(shapes)
    if len(payload) != expected:  # a codec whose prediction is wrong would corrupt the clock
        raise AssertionError(f"codec {codec.name}: encoded {len(payload)} bytes, predicted {expected}")
    return codec.decode(payload, shapes)


def _transmit_float32(codec: Dense, tensors: Tensors, shapes: Shapes) -> dict[str, torch.Tensor]:
    """transmit() for dense float32, without the byte string: float32 travels as it is in memory, so what the
    receiver decodes is a float32 copy of each tensor sent, bit for bit, and the payload is 4 bytes an entry of
    the model's shapes exactly when every tensor sent has its parameter's shape. Saves ~15 us an update, a
    third of the engine's round at 1,000 updates (benchmarks/scale.py); tests/testbed/test_payload.py checks it
    against encode and decode. A tensor of a part the codec does not carry is not sent (a dense downlink of a
    broadcast that also holds a compressed delta, 1-bit Adam's `q:` parts, for devices that hold last round's
    model), as encode() leaves it."""
    out = {}
    for part in codec.parts:
        for name, shape in shapes.items():
            t = tensors.get(key := part_key(part, name))
            if t is None or t.shape != shape:
                break
            t = t.detach() if t.requires_grad else t
            out[key] = (t.clone(memory_format=torch.contiguous_format) if t.dtype is torch.float32
                        else t.to(torch.float32, memory_format=torch.contiguous_format))
    if len(out) != len(codec.parts) * len(shapes):   # keys of other parts are not sent, as encode() leaves them
        sent = sum(t.numel() for k, t in tensors.items() if part_of(k) in codec.parts) * 4
        raise AssertionError(f"codec {codec.name}: encoded {sent} bytes, predicted {codec.nbytes(shapes)}"
                             + ("" if sent != codec.nbytes(shapes) else " (the tensors' shapes differ)"))
    return out
