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
