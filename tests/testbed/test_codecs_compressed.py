"""The adaptive-optimizer codecs (issue 6): multi-part Dense, TopK (FedAdam-SSM / FedAdam-Top), IntegerDelta
(FedLion) and Sign (1-bit baselines). Byte and bit counts are computed by hand in the comments."""
import math

import pytest
import torch

from testbed.payload import Dense, IntegerDelta, Sign, TopK, model_shapes, transmit

SHAPES = {"w": torch.Size([2, 3]), "b": torch.Size([2])}  # d = 8 entries, 2 tensors


def _three_parts():
    """An update with the model delta (plain names) and both moment deltas, in the model's order."""
    delta = {"w": torch.tensor([[0.125, -5.0, 0.25], [0.375, 4.0, -0.0625]]), "b": torch.tensor([1.0, -0.5])}
    m = {"w": torch.tensor([[7.0, 1 / 64, -2 / 64], [3 / 64, 4 / 64, 5 / 64]]), "b": torch.tensor([-6.0, 6 / 64])}
    v = {"w": torch.tensor([[0.5, 0.25, 0.125], [1.5, 2.5, 3.5]]), "b": torch.tensor([0.75, 9.0])}
    return delta | {f"m:{n}": t for n, t in m.items()} | {f"v:{n}": t for n, t in v.items()}


# ---------------------------------------------------------------- Dense with parts

def test_dense_parts_counts_every_part_on_the_model_shapes():
    codec = Dense(parts=("", "m", "v"))
    assert codec.nbytes(SHAPES) == 3 * 8 * 4 == 96 and codec.nbits(SHAPES) == 768
    assert Dense("float16", ("", "m")).nbytes(SHAPES) == 2 * 8 * 2
    assert Dense().nbytes(SHAPES) == 32 and Dense().name == "fp32" and codec.name == "fp32x3"


def test_dense_parts_roundtrip_part_major():
    tensors = _three_parts()
    codec = Dense(parts=("", "m", "v"))
    payload = codec.encode(tensors)
    assert len(payload) == 96
    # part-major: the 8 model entries, then the 8 of m, then the 8 of v
    assert torch.frombuffer(bytearray(payload[32:36]), dtype=torch.float32).item() == 7.0
    out = transmit(codec, tensors, SHAPES)
    assert list(out) == ["w", "b", "m:w", "m:b", "v:w", "v:b"]
    for key in tensors:
        assert torch.equal(out[key], tensors[key])
    # default shapes: those of the first part's (plain-named) tensors
    assert model_shapes(codec, tensors) == SHAPES
    assert list(transmit(codec, tensors)) == list(out)


def test_transmit_rejects_a_payload_whose_size_was_mispredicted():
    with pytest.raises(AssertionError, match="predicted"):
        transmit(Dense(), {"w": torch.ones(3)}, {"w": torch.Size([4])})


# ---------------------------------------------------------------- TopK

def test_topk_k_and_index_width_by_hand():
    codec = TopK(0.25)
    assert codec.k(8) == 2 and codec.k(3) == 1  # floor(0.75) = 0 -> at least 1
    assert TopK(0.29).k(100) == 29  # 0.29 * 100 = 28.999999999999996 in floats: taken as 29
    assert TopK(8 / 48).k(48) == 8 and TopK(1 / 3).k(3) == 1 and TopK(0.3).k(10) == 3
    assert TopK(0.05).k(44426) == 2221  # floor(2221.3)
    assert TopK(1.0).k(7) == 7
    assert [TopK.index_bits(d) for d in (1, 2, 3, 4, 5, 8, 9, 44426, 65536, 65537)] == [0, 1, 2, 2, 3, 3, 4, 16, 16, 17]


def test_topk_byte_and_bit_counts_by_hand():
    # d = 8, k = floor(0.25 * 8) = 2, indices 2 x ceil(log2 8) = 6 bits < 8-bit mask
    ssm = TopK(0.25, ("", "m", "v"))
    assert ssm.uses_indices(8)
    assert ssm.nbits(SHAPES) == 6 + 3 * 2 * 32 == 198
    assert ssm.nbytes(SHAPES) == 1 + 24 == 25  # 6 position bits padded to one byte
    top = TopK(0.25, ("", "m", "v"), shared_mask=False)
    assert top.nbits(SHAPES) == 3 * 6 + 3 * 2 * 32 == 210
    assert top.nbytes(SHAPES) == 3 + 24 == 27  # 18 position bits in one stream -> 3 bytes
    # k = 4: indices 12 bits > 8-bit mask
    assert not TopK(0.5).uses_indices(8)
    assert TopK(0.5).nbits(SHAPES) == 8 + 4 * 32 and TopK(0.5).nbytes(SHAPES) == 1 + 16
    assert TopK(0.5, ("", "m", "v"), "float16", shared_mask=False).nbits(SHAPES) == 3 * 8 + 3 * 4 * 16
    assert TopK(0.5, ("", "m", "v"), "float16", shared_mask=False).nbytes(SHAPES) == 3 + 24


def test_mask_or_indices_flips_where_k_indices_stop_being_cheaper():
    shapes = {"x": torch.Size([64])}  # ceil(log2 64) = 6 bits per index
    assert TopK(10 / 64).uses_indices(64) and TopK(10 / 64).nbits(shapes) == 60 + 10 * 32  # 60 < 64
    assert not TopK(11 / 64).uses_indices(64) and TopK(11 / 64).nbits(shapes) == 64 + 11 * 32  # 66 > 64
    # a tie (8 x 6 = 48 = d) goes to the bitmask
    assert not TopK(8 / 48).uses_indices(48) and TopK(8 / 48).nbits({"x": torch.Size([48])}) == 48 + 8 * 32


def test_ssm_shared_mask_from_the_model_update_with_indices_layout():
    tensors = _three_parts()
    codec = TopK(0.25, ("", "m", "v"))
    payload = codec.encode(tensors)
    assert len(payload) == 25
    # top-2 of |delta| over the flattened model [0.125, -5, 0.25, 0.375, 4, -0.0625, 1, -0.5]: positions 1 and 4,
    # sent as 3-bit indices 001 100, padded: 0b00110000
    assert payload[0] == 0b00110000
    values = torch.frombuffer(bytearray(payload[1:]), dtype=torch.float32).tolist()
    assert values == [-5.0, 4.0, 1 / 64, 4 / 64, 0.25, 2.5]  # delta, m, v at the shared positions 1 and 4
    out = transmit(codec, tensors, SHAPES)
    assert out["w"].tolist() == [[0, -5, 0], [0, 4, 0]] and out["b"].tolist() == [0, 0]
    assert out["m:w"].tolist() == [[0, 1 / 64, 0], [0, 4 / 64, 0]]  # m's own largest (7, -6) are dropped
    assert out["v:w"].tolist() == [[0, 0.25, 0], [0, 2.5, 0]] and out["v:b"].tolist() == [0, 0]


def test_top_separate_masks_keep_each_parts_own_largest():
    tensors = _three_parts()
    codec = TopK(0.25, ("", "m", "v"), shared_mask=False)
    payload = codec.encode(tensors)
    assert len(payload) == 27
    # indices: delta {1, 4}, m {0, 6} (7, -6), v {5, 7} (3.5, 9): 001 100 | 000 110 | 101 111 (+ 6 zero bits)
    assert payload[:3] == bytes([0b00110000, 0b01101011, 0b11000000])
    out = transmit(codec, tensors, SHAPES)
    assert out["w"].tolist() == [[0, -5, 0], [0, 4, 0]]
    assert out["m:w"].tolist() == [[7, 0, 0], [0, 0, 0]] and out["m:b"].tolist() == [-6, 0]
    assert out["v:w"].tolist() == [[0, 0, 0], [0, 0, 3.5]] and out["v:b"].tolist() == [0, 9]


def test_topk_bitmask_layout_and_roundtrip():
    tensors = _three_parts()
    codec = TopK(0.5, ("", "m", "v"))  # k = 4: |delta| top-4 = positions 1, 4, 6, 7 (-5, 4, 1, -0.5)
    payload = codec.encode(tensors)
    assert len(payload) == codec.nbytes(SHAPES) == 1 + 3 * 16
    assert payload[0] == 0b01001011
    out = transmit(codec, tensors, SHAPES)
    assert out["w"].tolist() == [[0, -5, 0], [0, 4, 0]] and out["b"].tolist() == [1, -0.5]
    assert out["v:b"].tolist() == [0.75, 9]
    # the independent masks: three bitmask bytes, then the values
    top = TopK(0.5, ("", "m", "v"), shared_mask=False)
    out = transmit(top, tensors, SHAPES)
    assert out["m:w"].tolist() == [[7, 0, 0], [0, 0, 5 / 64]] and out["m:b"].tolist() == [-6, 6 / 64]


def test_ssm_variants_select_the_mask_by_another_part_or_an_unsent_score():
    tensors = _three_parts()
    by_m = transmit(TopK(0.25, ("", "m", "v"), select_by="m"), tensors, SHAPES)  # FedAdam-SSM_M: m's top {0, 6}
    assert by_m["w"].tolist() == [[0.125, 0, 0], [0, 0, 0]] and by_m["b"].tolist() == [1, 0]
    score = {"score:w": torch.tensor([[0.0, 0, 1], [0, 0, 0]]), "score:b": torch.tensor([0.0, 1])}
    codec = TopK(0.25, ("", "m", "v"), select_by="score")  # e.g. Fairness-top's own choice {2, 7}
    assert model_shapes(codec, tensors | score) == SHAPES
    out = transmit(codec, tensors | score)
    assert set(out) == set(tensors) and len(codec.encode(tensors | score)) == 25  # the score is not sent
    assert out["w"].tolist() == [[0, 0, 0.25], [0, 0, 0]] and out["b"].tolist() == [0, -0.5]
    with pytest.raises(ValueError):
        TopK(0.25, select_by="m", shared_mask=False)


def test_topk_roundtrip_on_a_large_random_update_keeps_the_largest_exactly():
    gen = torch.Generator().manual_seed(0)
    shapes = {"a": torch.Size([300, 7]), "b": torch.Size([13])}  # d = 2113, ceil(log2 d) = 12
    tensors = {n: torch.randn(s, generator=gen) for n, s in shapes.items()}
    tensors |= {f"m:{n}": torch.randn(s, generator=gen) for n, s in shapes.items()}
    for fraction, indices in ((0.05, True), (0.2, False)):  # k = 105: 1260 < 2113 bits; k = 422: 5064 > 2113
        codec = TopK(fraction, ("", "m"))
        assert codec.uses_indices(2113) is indices
        out = transmit(codec, tensors)
        flat = torch.cat([tensors["a"].reshape(-1), tensors["b"]])
        got = torch.cat([out["a"].reshape(-1), out["b"]])
        keep = got != 0
        assert int(keep.sum()) == codec.k(2113)
        assert torch.equal(got[keep], flat[keep])  # kept entries exact
        assert flat[keep].abs().min() >= flat[~keep].abs().max()  # and they are the largest
        m = torch.cat([tensors["m:a"].reshape(-1), tensors["m:b"]])
        assert torch.equal(torch.cat([out["m:a"].reshape(-1), out["m:b"]]), torch.where(keep, m, 0))
        fp16 = transmit(TopK(fraction, ("", "m"), "float16"), tensors)
        assert torch.equal(fp16["a"], torch.where(out["a"] != 0, out["a"].half().float(), 0))


# ---------------------------------------------------------------- IntegerDelta (FedLion)

def test_integer_delta_bits_per_entry():
    assert [IntegerDelta(e).bits_per_entry for e in (1, 2, 3, 4, 5, 10, 20)] == [2, 3, 3, 4, 4, 5, 6]
    # the paper's bits per parameter with the fp32 momentum: 36, 37, 38
    one = {"x": torch.Size([1000])}
    assert [IntegerDelta(e).nbits(one) / 1000 for e in (5, 10, 20)] == [36, 37, 38]


def test_integer_delta_byte_count_layout_and_roundtrip():
    shapes = {"w": torch.Size([2, 2]), "b": torch.Size([3])}  # d = 7
    codec = IntegerDelta(5)  # 4 bits per entry + fp32 momentum
    assert codec.nbits(shapes) == 7 * 4 + 7 * 32 == 252
    assert codec.nbytes(shapes) == 4 + 28 == 32  # 28 bits -> 4 bytes
    assert IntegerDelta(5, dense_parts=()).nbytes(shapes) == 4
    assert IntegerDelta(10, dtype="float16").nbytes(shapes) == math.ceil(35 / 8) + 14
    tensors = {"w": torch.tensor([[-5.0, 0], [5, 2]]), "b": torch.tensor([-1.0, 3, 4]),
               "m:w": torch.tensor([[0.1, -0.2], [0.3, 1e-8]]), "m:b": torch.tensor([5.0, -6, 7])}
    payload = codec.encode(tensors)
    # delta + 5 = 0, 5, 10, 7, 4, 8, 9 as nibbles, then 4 zero bits
    assert payload[:4] == bytes([0x05, 0xA7, 0x48, 0x90])
    out = transmit(codec, tensors, shapes)
    assert list(out) == ["w", "b", "m:w", "m:b"]
    for key in tensors:
        assert torch.equal(out[key], tensors[key])


def test_integer_delta_rejects_values_it_cannot_carry():
    with pytest.raises(ValueError, match="integers"):
        IntegerDelta(2, dense_parts=()).encode({"x": torch.tensor([1.0, 2.5])})
    with pytest.raises(ValueError, match="integers"):
        IntegerDelta(2, dense_parts=()).encode({"x": torch.tensor([1.0, -3.0])})


def test_integer_delta_roundtrip_many_entries():
    gen = torch.Generator().manual_seed(1)
    shapes = {"a": torch.Size([70001]), "b": torch.Size([5, 3])}  # more than one packing chunk
    tensors = {n: torch.randint(-20, 21, s, generator=gen).float() for n, s in shapes.items()}
    tensors |= {f"m:{n}": torch.randn(s, generator=gen) for n, s in shapes.items()}
    out = transmit(IntegerDelta(20), tensors)
    assert all(torch.equal(out[k], tensors[k]) for k in tensors)


# ---------------------------------------------------------------- Sign

def test_sign_byte_count_layout_and_decode():
    codec = Sign()
    assert codec.nbits(SHAPES) == 8 + 2 * 32 == 72 and codec.nbytes(SHAPES) == 8 + 1 == 9
    assert Sign(scale=False).nbytes(SHAPES) == 1 and Sign(parts=("", "m")).nbits(SHAPES) == 16 + 4 * 32
    assert Sign(parts=("", "m")).nbytes(SHAPES) == 16 + 2
    tensors = {"w": torch.tensor([[1.0, -2, 3], [-4, 0, 6]]), "b": torch.tensor([-1.0, 3])}
    payload = codec.encode(tensors)
    assert len(payload) == 9
    s = torch.tensor(16 / 6).item()  # mean |w| = 16 / 6 as a float32
    assert torch.frombuffer(bytearray(payload[:8]), dtype=torch.float32).tolist() == [s, 2.0]
    assert payload[8] == 0b01010010  # 1 = negative; zero counts as positive
    out = transmit(codec, tensors)
    assert out["w"].tolist() == [[s, -s, s], [-s, s, s]] and out["b"].tolist() == [-2, 2]
    assert transmit(Sign(scale=False), tensors)["b"].tolist() == [-1, 1]
    rms = transmit(Sign(norm="rms"), {"x": torch.tensor([3.0, -4.0])})["x"]
    assert torch.allclose(rms, torch.tensor([1.0, -1.0]) * math.sqrt(12.5))


# ---------------------------------------------------------- the paper's per-device uplink (FedAdam-SSM Sec. VII-A)

def test_fedadam_ssm_paper_uplink_figures_on_lenet5():
    """Spec section 3: LeNet-5 (d = 44,426) at alpha = 0.05, q = 32: SSM 0.249, Top 0.320, FedAdam 4.265 Mbit.

    k = floor(0.05 * 44426) = 2221; ceil(log2 44426) = 16, so indices beat the bitmask:
      SSM:     min(3kq + d, k(3q + 16)) = min(257,642, 248,752) = 248,752 bits = 31,094 bytes
      Top:     min(3(kq + d), 3k(q + 16)) = min(346,494, 319,824) = 319,824 bits = 39,978 bytes
      FedAdam: 3dq = 4,264,896 bits = 533,112 bytes
    The figures are these bit counts in units of 1 Mbit = 1e6 bits, rounded to 3 decimals (2^20 would give
    0.237 / 0.305 / 4.067). The index width must be rounded UP: with log2 d = 15.44 unrounded, SSM would be
    247,503 bits = 0.248. floor and ceil of alpha*d (2221 / 2222) both round to the same figures; k = floor per
    the spec (A4)."""
    from testbed.models import MODELS

    model = MODELS["lenet5"]((1, 28, 28), 10, 1.0)
    shapes = {n: p.shape for n, p in model.named_parameters()}
    assert sum(math.prod(s) for s in shapes.values()) == 44426
    ssm = TopK(0.05, ("", "m", "v"))
    top = TopK(0.05, ("", "m", "v"), shared_mask=False)
    fedadam = Dense(parts=("", "m", "v"))
    assert (ssm.nbits(shapes), top.nbits(shapes), fedadam.nbits(shapes)) == (248752, 319824, 4264896)
    assert (ssm.nbytes(shapes), top.nbytes(shapes), fedadam.nbytes(shapes)) == (31094, 39978, 533112)
    assert [round(c.nbits(shapes) / 1e6, 3) for c in (ssm, top, fedadam)] == [0.249, 0.320, 4.265]
    assert round(fedadam.nbits(shapes) / ssm.nbits(shapes), 2) == 17.15
    assert round(top.nbits(shapes) / ssm.nbits(shapes), 2) == 1.29
    # a real payload has exactly that size
    gen = torch.Generator().manual_seed(0)
    update = {f"{p}{n}": torch.randn(s, generator=gen) for p in ("", "m:", "v:") for n, s in shapes.items()}
    assert len(ssm.encode(update)) == 31094 and len(top.encode(update)) == 39978


@pytest.mark.parametrize("d, figures", [
    (9_750_922, (56.56, 76.06, 936.09)),    # VGG-11 CIFAR: the bitmask wins (k = 487,546, 24-bit indices)
    (11_173_962, (64.81, 87.16, 1072.70)),  # ResNet-18 CIFAR-style
])
def test_fedadam_ssm_paper_uplink_figures_on_the_large_models(d, figures):
    shapes = {"x": torch.Size([d])}  # the counts depend on d alone
    ssm, top = TopK(0.05, ("", "m", "v")), TopK(0.05, ("", "m", "v"), shared_mask=False)
    assert not ssm.uses_indices(d)
    k = d // 20
    assert ssm.nbits(shapes) == 3 * k * 32 + d and top.nbits(shapes) == 3 * (k * 32 + d)
    got = [round(c.nbits(shapes) / 1e6, 2) for c in (ssm, top, Dense(parts=("", "m", "v")))]
    assert got == list(figures)


def test_fedlion_uplink_on_its_emnist_cnn():
    """FedLion Sec. 2.1: Delta at ceil(log2(2E+1)) bits + the fp32 momentum; the repo's CNN has d = 26,010."""
    from testbed.models import MODELS

    shapes = {n: p.shape for n, p in MODELS["cnn_fedlion"]((1, 28, 28), 10, 1.0).named_parameters()}
    assert sum(math.prod(s) for s in shapes.values()) == 26010
    for e, bits in ((5, 36), (10, 37), (20, 38)):
        codec = IntegerDelta(e)
        assert codec.nbits(shapes) == bits * 26010
        assert codec.nbytes(shapes) == math.ceil((bits - 32) * 26010 / 8) + 4 * 26010
    assert Dense().nbits(shapes) == 32 * 26010  # FedAvg's uplink


def test_codecs_are_hashable_for_the_engines_size_cache():
    codecs = [Dense(parts=("", "m", "v")), TopK(0.05, ("", "m", "v")), TopK(0.05, ("", "m", "v"), shared_mask=False),
              IntegerDelta(5), Sign()]
    assert all(c.depends_only_on_shapes for c in codecs)
    assert len({c: i for i, c in enumerate(codecs)}) == 5 and TopK(0.05) == TopK(0.05)
