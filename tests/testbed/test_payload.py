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
