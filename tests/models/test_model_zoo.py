"""Every registered model: reference input -> output shape, backward, width, torch.func.functional_call."""
from functools import lru_cache

import pytest
import torch

from testbed.models import MODELS
from testbed.models.summary import REFERENCE_INPUTS, build_reference, count_parameters

NAMES = sorted(MODELS)


@lru_cache(maxsize=None)
def _model(name: str, width: float = 1.0):
    torch.manual_seed(0)
    return build_reference(name, width)[0]


def _batch(name: str, n: int = 2) -> torch.Tensor:
    example = REFERENCE_INPUTS[name].example()
    g = torch.Generator().manual_seed(1)
    if example.dtype == torch.long:
        return torch.randint(0, REFERENCE_INPUTS[name].num_classes, (n, *example.shape[1:]), generator=g)
    return torch.randn((n, *example.shape[1:]), generator=g)


def test_every_model_has_a_reference_input():
    missing = set(MODELS) - set(REFERENCE_INPUTS)
    assert not missing, f"give {sorted(missing)} a reference input in testbed/models/summary.py"
    assert set(REFERENCE_INPUTS) <= set(MODELS)


@pytest.mark.parametrize("name", NAMES)
def test_output_shape_on_reference_input(name):
    out = _model(name)(_batch(name))
    assert out.shape == (2, REFERENCE_INPUTS[name].num_classes)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()


@pytest.mark.parametrize("name", NAMES)
def test_backward_reaches_every_parameter(name):
    model = _model(name)
    model.zero_grad(set_to_none=True)
    x = _batch(name)
    y = torch.arange(2) % REFERENCE_INPUTS[name].num_classes
    torch.nn.functional.cross_entropy(model(x), y).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing, missing
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


WITHOUT_HIDDEN_UNITS = {"logreg"}  # a single linear layer: input and classes fix its size, width has nothing to scale


@pytest.mark.parametrize("name", sorted(set(NAMES) - WITHOUT_HIDDEN_UNITS))
def test_half_width_shrinks_the_model_but_keeps_the_classes(name):
    half = _model(name, 0.5)
    assert count_parameters(half) < count_parameters(_model(name))
    assert half(_batch(name)).shape == (2, REFERENCE_INPUTS[name].num_classes)


@pytest.mark.parametrize("name", NAMES)
def test_functional_call_with_named_parameters_reproduces_forward(name):
    model, x = _model(name), _batch(name)
    assert list(model.buffers()) == []  # no running statistics: nothing outside named_parameters
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    with torch.no_grad():
        expected = model(x)
        got = torch.func.functional_call(model, params, (x,))
    torch.testing.assert_close(got, expected)
    # and with different values it really uses the given tensors
    shifted = {n: p + 0.01 for n, p in params.items()}
    with torch.no_grad():
        assert not torch.allclose(torch.func.functional_call(model, shifted, (x,)), expected)


def test_lstm_lm_decoder_is_tied_to_the_embedding():
    model = _model("lstm_lm")
    assert model.decoder.weight is model.encoder.weight
    assert "decoder.weight" not in dict(model.named_parameters())
    # functional_call keeps the tie: new embedding values reach the decoder too
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    params["encoder.weight"] = torch.zeros_like(params["encoder.weight"])
    with torch.no_grad():
        out = torch.func.functional_call(model, params, (_batch("lstm_lm"),))
    torch.testing.assert_close(out, params["decoder.bias"].expand(2, -1))


def test_vgg_norm_option():
    bn, gn = _model("vgg11"), _model("vgg11_gn")
    assert any(isinstance(m, torch.nn.BatchNorm2d) and not m.track_running_stats for m in bn.modules())
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in gn.modules())
    assert {m.num_groups for m in gn.modules() if isinstance(m, torch.nn.GroupNorm)} == {32}
    with pytest.raises(ValueError, match="norm"):
        MODELS["vgg11"]((3, 32, 32), 10, 1.0, norm="ln")


def test_vgg_classifier_sizes():
    assert _model("vgg11").classifier.in_features == 512  # 32x32
    assert _model("vgg16").classifier.in_features == 2048  # 64x64: 512 * 2 * 2
    assert _model("vgg16").classifier.out_features == 200


def test_odd_widths_still_build():
    for name in ("resnet18", "resnet20", "vgg11_gn", "cnn_fedlion", "char_lstm", "lstm_lm"):
        model = build_reference(name, 0.3)[0]
        assert model(_batch(name)).shape == (2, REFERENCE_INPUTS[name].num_classes)
