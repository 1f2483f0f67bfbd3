"""testbed.models.pool.max_pool2d: torch.max_pool2d's exact values and gradients whichever way they are computed."""
import pytest
import torch
from torch.func import grad, vmap

from testbed.models.pool import MaxPool2d, max_pool2d


def _with_ties(*shape, seed=0, specials=False) -> torch.Tensor:
    """Random values with constant regions (a digit's background after a convolution gives those), rounded values
    that tie within windows, and with `specials` NaN, +-inf and +-0 scattered in."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    x[..., : shape[-2] // 3, :] = 0.25
    coarse = torch.rand(*shape, generator=g) < 0.3
    x[coarse] = torch.round(x[coarse])
    if specials:
        for value in (float("nan"), float("inf"), float("-inf"), 0.0, -0.0):
            x[torch.rand(*shape, generator=g) < 0.03] = value
    return x


def _torch_pool_and_grad(x, kernel, stride, upstream):
    leaf = x.clone().requires_grad_()
    out = torch.max_pool2d(leaf, kernel, stride)
    out.backward(upstream)
    return out.detach(), leaf.grad


@pytest.mark.parametrize("shape", [(10, 32, 24, 24), (3, 5, 7, 9), (2, 3, 2, 2), (4, 6, 8, 8)])
@pytest.mark.parametrize("specials", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_2x2_values_and_gradients_are_torchs_bit_for_bit(shape, specials, dtype):
    for seed in range(5):
        x = _with_ties(*shape, seed=seed, specials=specials).to(dtype)
        upstream = torch.randn(*shape[:2], shape[2] // 2, shape[3] // 2, dtype=dtype)
        expected, expected_grad = _torch_pool_and_grad(x, 2, 2, upstream)
        leaf = x.clone().requires_grad_()
        out = max_pool2d(leaf, 2)
        out.backward(upstream)
        assert torch.equal(out.isnan(), expected.isnan())
        assert torch.equal(out.nan_to_num(), expected.nan_to_num())
        assert torch.equal(leaf.grad, expected_grad)            # +0.0 where torch leaves +0.0
        assert torch.equal(leaf.grad.signbit(), expected_grad.signbit())
        with torch.no_grad():
            fast = max_pool2d(x, 2)
        assert torch.equal(fast.isnan(), expected.isnan()) and fast.is_contiguous()
        assert torch.equal(fast.nan_to_num(), expected.nan_to_num())


@pytest.mark.parametrize("shape, kernel, stride", [((100, 16, 14, 14), 2, 1), ((100, 32, 5, 5), 2, 1),
                                                    ((3, 8, 6, 6), 2, 1), ((100, 8, 12, 12), 3, 3)])
def test_other_windows_same_values_without_autograd_and_same_gradients_with(shape, kernel, stride):
    x = _with_ties(*shape)
    with torch.no_grad():
        pooled = max_pool2d(x, kernel, stride)
    assert torch.equal(pooled, torch.max_pool2d(x, kernel, stride)) and pooled.is_contiguous()
    upstream = torch.randn_like(pooled)
    expected, expected_grad = _torch_pool_and_grad(x, kernel, stride, upstream)
    leaf = x.clone().requires_grad_()
    max_pool2d(leaf, kernel, stride).backward(upstream)
    assert torch.equal(leaf.grad, expected_grad)


def test_under_vmap_with_and_without_autograd():
    x = _with_ties(2, 50, 32, 12, 12)  # each sample alone is above the channels-last threshold
    expected = vmap(grad(lambda a: torch.max_pool2d(a, 2).sum()))(x)
    assert torch.equal(vmap(grad(lambda a: max_pool2d(a, 2).sum()))(x), expected)
    with torch.no_grad():
        expected = torch.max_pool2d(x.flatten(0, 1), 2).view(2, 50, 32, 6, 6)
        assert torch.equal(vmap(lambda a: max_pool2d(a, 2))(x), expected)


def test_module_form_has_no_state():
    assert MaxPool2d(2).state_dict() == {}
