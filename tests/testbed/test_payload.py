import pytest
import torch

from testbed.payload import CODECS, Dense, transmit


def test_dense_byte_counts_by_hand():
    shapes = {"w": torch.Size([3, 4]), "b": torch.Size([4])}  # 12 + 4 = 16 entries
    assert Dense("float32").nbytes(shapes) == 64
    assert Dense("float16").nbytes(shapes) == 32


@pytest.mark.parametrize("name", ["fp32", "fp16"])
def test_encoded_size_equals_prediction_and_roundtrips(name):
    codec = CODECS[name]
    tensors = {"w": torch.arange(12.0).reshape(3, 4) / 7, "b": torch.tensor([1.5, -2.0, 0.0, 3.25])}
    payload = codec.encode(tensors)
    assert len(payload) == codec.nbytes({k: v.shape for k, v in tensors.items()})
    out = transmit(codec, tensors)
    assert list(out) == ["w", "b"] and out["w"].shape == (3, 4) and out["w"].dtype == torch.float32
    tol = 0 if name == "fp32" else 1e-3
    for k in tensors:
        torch.testing.assert_close(out[k], tensors[k], atol=tol, rtol=tol)


def test_float32_transmit_is_encode_then_decode_bit_for_bit():
    """transmit() skips the byte string for dense float32: it must give exactly what decoding the encoded bytes
    gives, for odd values (NaN payloads, infinities, -0.0, subnormals), float64 and transposed inputs, and
    several parts; and a tensor of the wrong shape still fails the size check."""
    odd = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-45, 3.4e38], dtype=torch.float32)
    tensors = {"w": torch.randn(4, 6, dtype=torch.float64).t(), "b": odd,
               "m:w": torch.randn(6, 4), "m:b": -odd}
    shapes = {"w": torch.Size([6, 4]), "b": torch.Size([6])}
    codec = Dense("float32", parts=("", "m"))
    reference = codec.decode(codec.encode(tensors), shapes)
    out = transmit(codec, tensors, shapes)
    assert list(out) == list(reference) == ["w", "b", "m:w", "m:b"]
    for key in out:
        assert out[key].dtype == torch.float32 and out[key].is_contiguous()
        assert out[key].numpy().tobytes() == reference[key].numpy().tobytes()
    out["b"][0] = 1.0
    assert odd[0] != odd[0]  # the receiver's copy, not the sender's tensor
    with pytest.raises(AssertionError, match="encoded 104 bytes, predicted 120"):
        transmit(Dense("float32"), {"w": torch.zeros(6, 4), "b": torch.zeros(2)}, shapes)


def test_fp16_rounds_like_half_precision():
    out = transmit(CODECS["fp16"], {"x": torch.tensor([1 / 3])})
    assert out["x"].item() == torch.tensor(1 / 3).half().float().item() != 1 / 3


def test_unit_masked_byte_count_and_layout_by_hand():
    from testbed.payload import UnitMasked

    codec = UnitMasked({"w": torch.tensor([True, False, True, True, False])})
    tensors = {"w": torch.arange(15.0).reshape(5, 3), "b": torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])}
    shapes = {k: v.shape for k, v in tensors.items()}
    # w: 1 byte of pattern + 3 kept rows x 3 x 4 bytes = 37; b dense: 5 x 4 = 20
    assert codec.nbytes(shapes) == 57
    assert UnitMasked(codec.masks, "float16").nbytes(shapes) == 1 + 18 + 10
    payload = codec.encode(tensors)
    assert len(payload) == 57 and payload[0] == 0b10110000  # units 0, 2, 3 kept, most significant bit first
    out = transmit(codec, tensors)
    assert out["w"].tolist() == [[0, 1, 2], [0, 0, 0], [6, 7, 8], [9, 10, 11], [0, 0, 0]]
    assert torch.equal(out["b"], tensors["b"])


def test_unit_masked_columns_byte_count_and_layout_by_hand():
    from testbed.payload import UnitMasked

    conv = torch.arange(24.0).reshape(3, 4, 2)  # rows x columns x a trailing dim
    fc = torch.arange(10.0).reshape(1, 10)
    codec = UnitMasked({"conv": torch.tensor([True, False, True])}, "float32",
                       columns={"conv": torch.tensor([False, True, True, False]), "fc": torch.arange(10) % 3 == 0})
    tensors = {"conv": conv, "fc": fc, "b": torch.tensor([1.0, 2.0])}
    shapes = {k: v.shape for k, v in tensors.items()}
    # conv: 1 byte of rows + 1 byte of columns + 2 rows x 2 columns x 2 x 4 bytes = 34;
    # fc: no row mask, ceil(10/8) = 2 bytes of columns (0, 3, 6, 9) + 1 x 4 x 4 bytes = 18; b dense: 8
    assert codec.nbytes(shapes) == 34 + 18 + 8
    assert UnitMasked(codec.masks, "float16", codec.columns).nbytes(shapes) == (2 + 8 * 2) + (2 + 4 * 2) + 2 * 2
    payload = codec.encode(tensors)
    assert len(payload) == 60
    assert payload[0] == 0b10100000 and payload[1] == 0b01100000  # rows 0, 2; columns 1, 2
    assert payload[34:36] == bytes([0b10010010, 0b01000000])  # columns 0, 3, 6 | 9
    out = transmit(codec, tensors)
    assert out["conv"][0].tolist() == [[0, 0], [2, 3], [4, 5], [0, 0]]
    assert out["conv"][2].tolist() == [[0, 0], [18, 19], [20, 21], [0, 0]]
    assert out["conv"][1].abs().sum() == 0
    assert out["fc"].tolist() == [[0, 0, 0, 3, 0, 0, 6, 0, 0, 9]]
    assert torch.equal(out["b"], tensors["b"])


def test_unit_masked_structured_sends_a_bitmask_only_where_something_is_dropped():
    from testbed.payload import UnitMasked

    all_rows, half = torch.ones(4, dtype=torch.bool), torch.tensor([True, True, False, False])
    codec = UnitMasked.structured({"w": (half, torch.ones(3, dtype=torch.bool)), "head": (all_rows, half),
                                   "norm": (half, None), "bias": (all_rows, None)}, "float16")
    assert set(codec.masks) == {"w", "norm"} and set(codec.columns) == {"head"} and codec.dtype == "float16"
    shapes = {"w": torch.Size([4, 3]), "head": torch.Size([4, 4]), "norm": torch.Size([4]), "bias": torch.Size([4])}
    assert codec.nbytes(shapes) == (1 + 2 * 3 * 2) + (1 + 4 * 2 * 2) + (1 + 2 * 2) + 4 * 2
