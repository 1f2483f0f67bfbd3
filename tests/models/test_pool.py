"""testbed.models.pool.max_pool2d: torch.max_pool2d's exact values whichever kernel computes them."""
import pytest
import torch
from torch.func import grad, vmap

from testbed.models.pool import CHANNELS_LAST_FROM, MaxPool2d, max_pool2d


def _with_ties(*shape) -> torch.Tensor:
    """Random values with constant regions, as a digit's background gives after a convolution."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    x[..., : shape[-2] // 2, :] = 0.25
    return x


@pytest.mark.parametrize("shape, kernel, stride", [((100, 32, 24, 24), 2, None), ((100, 16, 14, 14), 2, 1),
                                                    ((100, 64, 8, 8), 2, 2), ((3, 8, 6, 6), 2, None)])
def test_same_values_as_torch_without_autograd(shape, kernel, stride):
    x = _with_ties(*shape)
    with torch.no_grad():
        pooled = max_pool2d(x, kernel, stride)
        assert torch.equal(pooled, torch.max_pool2d(x, kernel, stride if stride else kernel))
    assert pooled.is_contiguous()


def test_training_keeps_torch_kernel_and_gradients():
    x = _with_ties(10, 32, 24, 24)
    assert x.numel() >= CHANNELS_LAST_FROM
    ours, plain = x.clone().requires_grad_(), x.clone().requires_grad_()
    max_pool2d(ours, 2).square().sum().backward()
    torch.max_pool2d(plain, 2).square().sum().backward()
    assert torch.equal(ours.grad, plain.grad)


def test_under_vmap_with_and_without_autograd():
    x = _with_ties(2, 50, 32, 12, 12)  # each sample alone is above the threshold
    expected = vmap(grad(lambda a: torch.max_pool2d(a, 2).sum()))(x)
    assert torch.equal(vmap(grad(lambda a: max_pool2d(a, 2).sum()))(x), expected)
    with torch.no_grad():
        expected = torch.max_pool2d(x.flatten(0, 1), 2).view(2, 50, 32, 6, 6)
        assert torch.equal(vmap(lambda a: max_pool2d(a, 2))(x), expected)


def test_module_form_has_no_state():
    assert MaxPool2d(2).state_dict() == {}
