"""The papers' stated model figures, reproduced from our models (within 2% unless exact).

Conventions differ between papers, so each test says what the paper counts. The testbed counts one FLOP per
multiply-add (fvcore; forward_flops_per_sample), which also charges normalization layers ~5 per element.
"""
import math

import pytest
import torch
from torch import nn

from testbed.flops import FLOPS_PER_MULTIPLY_ADD, forward_flops_per_sample, training_flops
from testbed.models import MODELS
from testbed.models.summary import count_parameters
from testbed.models.units import prunable_layers
from testbed.submodel import submodel_flops, unit_masks


def _flops(name, shape, classes):
    return forward_flops_per_sample(MODELS[name](shape, classes, 1.0), torch.zeros(1, *shape))


def _close(value, paper, rel=0.02):
    return math.isclose(value, paper, rel_tol=rel)


# ---------------------------------------------------------------- FedDUMAP (MFLOPs = forward multiply-adds)

def test_feddumap_cnn():
    """Paper §5: "CNN contains 122570 parameters"; Tables 10/11: 4.5 MFLOPs (CIFAR-10) and 4.6 (CIFAR-100).
    The MFLOPs are forward multiply-adds of one 3x32x32 sample (specs/feddumap.md §6: 4.549 M / 4.554 M)."""
    model = MODELS["cnn_feddumap"]((3, 32, 32), 10, 1.0)
    assert count_parameters(model) == 122_570
    flops10, flops100 = _flops("cnn_feddumap", (3, 32, 32), 10), _flops("cnn_feddumap", (3, 32, 32), 100)
    assert flops10 == 32 * 30 * 30 * 27 + 64 * 13 * 13 * 288 + 64 * 4 * 4 * 576 + 1024 * 64 + 64 * 10
    assert _close(flops10, 4.549e6) and _close(flops100, 4.554e6)
    assert round(flops10 / 1e6, 1) == 4.5 and round(flops100 / 1e6, 1) == 4.6


def test_feddumap_lenet5():
    """Tables 10/11: LeNet 0.7 MFLOPs (one decimal); specs/feddumap.md §6: 0.652 M forward multiply-adds."""
    flops = _flops("lenet5", (3, 32, 32), 10)
    assert flops == 6 * 28 * 28 * 75 + 16 * 10 * 10 * 150 + 400 * 120 + 120 * 84 + 84 * 10 == 651_720
    assert _close(flops, 0.65e6) and round(flops / 1e6, 1) == 0.7


def test_feddumap_vgg11():
    """Tables 10/11: VGG 153.3 MFLOPs. Our vgg11 is FedLPS's (BatchNorm, one Linear 512 -> C): fvcore counts
    153.53 M = 152.76 M of convs + 0.01 M of classifier + 0.76 M for BatchNorm (5 per element), +0.15%.
    Why the paper has 153.3: FedDUMAP's network (per the third-party FedDUAP port, models/vgg.py) has NO
    BatchNorm and a three-layer classifier 512 -> 512 -> 512 -> C. Its multiply-adds are exactly our convs plus
    that classifier: 152.76 M + 0.53 M = 153.29 M, which is the paper's 153.3 to the printed digit (the
    digest's "152.8 M + BN" explanation is not needed)."""
    model = MODELS["vgg11"]((3, 32, 32), 10, 1.0)
    total = _flops("vgg11", (3, 32, 32), 10)
    assert _close(total, 153.3e6)
    bn_elements = 64 * 32 * 32 + 128 * 16 * 16 + 2 * 256 * 8 * 8 + 2 * 512 * 4 * 4 + 2 * 512 * 2 * 2
    convs = total - 5 * bn_elements - model.classifier.weight.numel()
    assert convs == 152_764_416
    feddumap_classifier = 512 * 512 + 512 * 512 + 512 * 10
    assert round((convs + feddumap_classifier) / 1e6, 1) == 153.3


# ---------------------------------------------------------------- FedLion, FedAdam-SSM, ResNets (parameters)

def test_fedlion_emnist_cnn_has_26010_parameters():
    """specs/fedlion.md §4 (authors' code): the EMNIST-digits "2-layer CNN" has 26,010 parameters."""
    model = MODELS["cnn_fedlion"]((1, 28, 28), 10, 1.0)
    assert count_parameters(model) == 26_010
    assert model.fc1.in_features == 512


def test_fedadam_ssm_and_resnet_parameter_counts():
    """Not paper figures (FedAdam-SSM gives no widths, FedLion no count): the digests' derived sizes, d = 44,426
    for the LeNet-5-style FMNIST CNN and 11,173,962 for CIFAR-style ResNet-18 (GroupNorm has BatchNorm's
    parameter count), and ResNet-20's 0.27 M (option-A shortcuts have no parameters: 269,722)."""
    assert count_parameters(MODELS["cnn_fedadam_ssm"]((1, 28, 28), 10, 1.0)) == 44_426
    assert count_parameters(MODELS["resnet18"]((3, 32, 32), 10, 1.0)) == 11_173_962
    assert count_parameters(MODELS["resnet20"]((3, 32, 32), 10, 1.0)) == 269_722


# ---------------------------------------------------------------- FedLPS (total training FLOPs, Table I)

def fedlps_forward_flops(model: nn.Module, example: torch.Tensor) -> int:
    """FedLPS's own per-sample count (utils/main_flops_counter.py, dense model): hooks on Conv2d and Linear only,
    conv (2*numel(W) + out_channels if bias) * H_out * W_out, linear 2*numel(W) + numel(b). Its BatchNorm,
    ReLU and pooling hooks are defined but never registered, so those count 0."""
    total = 0

    def conv(m, inp, out):
        nonlocal total
        total += (2 * m.weight.numel() + (m.out_channels if m.bias is not None else 0)) * out.shape[2] * out.shape[3]

    def linear(m, inp, out):
        nonlocal total
        total += 2 * m.weight.numel() + (m.bias.numel() if m.bias is not None else 0)

    handles = [m.register_forward_hook(conv if isinstance(m, nn.Conv2d) else linear)
               for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    try:
        with torch.no_grad():
            model(example)
    finally:
        for h in handles:
            h.remove()
    return total


def _fedlps_samples(per_client: int, batch: int, clients_per_round=10, epochs=5, rounds=100) -> int:
    """Samples FedLPS charges: 90% of a client's shard data is train, each batch counted at the full batch size."""
    train = int(0.9 * per_client)
    return math.ceil(train / batch) * batch * epochs * clients_per_round * rounds


def test_fedlps_fedavg_mnist_training_flops():
    """FedLPS Table I: FedAvg on MNIST costs 2.8e12 FLOPs in total.

    Setting (specs/fedlps.md §3, authors' script): 2 shards of 100 images per client, 90% train = 180, batch 32
    -> 6 batches counted at full size = 192 samples per epoch; x 5 epochs x 10 clients x 100 rounds; training
    = 3 x forward. FedLPS counts 2 FLOPs per multiply-add (2*nnz(W)) plus one per bias add, so its forward
    count of the MNIST CNN is 968,100 where the testbed's (fvcore, one per multiply-add) is 480,500. Like with
    like: 3 x 968,100 x 960,000 = 2.788e12 (-0.4%); the testbed's training_flops is half of that (1.38e12),
    and times FLOPS_PER_MULTIPLY_ADD = 2 it gives 2.768e12 (-1.2%, the bias adds being the difference)."""
    model, x = MODELS["cnn_fedlps"]((1, 28, 28), 10, 1.0), torch.zeros(1, 1, 28, 28)
    samples = _fedlps_samples(200, 32)
    assert samples == 192 * 5 * 10 * 100
    ours = forward_flops_per_sample(model, x)
    theirs = fedlps_forward_flops(model, x)
    bias_adds = 10 * 24 * 24 + 20 * 8 * 8 + 50 + 10
    assert theirs == 2 * ours + bias_adds == 968_100
    assert _close(3 * theirs * samples, 2.8e12)
    assert _close(FLOPS_PER_MULTIPLY_ADD * training_flops(ours, samples), 2.8e12)
    assert not _close(training_flops(ours, samples), 2.8e12, rel=0.4)  # raw multiply-adds: half the paper's


def test_fedlps_submodel_methods_mnist_training_flops():
    """FedLPS Tables I/II, MNIST, the submodel methods' total FLOPs (1e12) against FedAvg's 2.8, at the same
    settings, with the capability z drawn uniformly from {1, 1/2, 1/4, 1/8, 1/16} (expected over the draw):
    - FLST (s = 0.5 for all): 1.4. RCR-Dyn (s = z): 1.1. HeteroFL, FjORD, FedRolex, eFD (width z): 1.1 each.
    testbed.submodel's rule counts what a device computes: FedLPS-style masks (biases kept, so a masked unit
    still feeds the next layer) scale a layer by its kept outputs, and FLST/RCR reproduce 1.4 and 1.1. The width
    methods drop whole units, so their next layer loses inputs too. This gives 0.83, not 1.1. The paper's 1.1 is
    its masked count applied to them, i.e. it charges them for inputs they no longer have (x1.28 here)."""
    model, x = MODELS["cnn_fedlps"]((1, 28, 28), 10, 1.0), torch.zeros(1, 1, 28, 28)
    dense = forward_flops_per_sample(model, x)
    fedavg = FLOPS_PER_MULTIPLY_ADD * training_flops(dense, _fedlps_samples(200, 32))  # 2.768e12, test above
    units, params = prunable_layers(model), dict(model.named_parameters())

    def total(ratio, structured):  # FedAvg's total x the submodel's share of the dense forward count
        return fedavg * submodel_flops(model, x, unit_masks(params, units, ratio, "ordered"), structured) / dense

    tiers = (1, 1 / 2, 1 / 4, 1 / 8, 1 / 16)
    masked = sum(total(z, structured=False) for z in tiers) / len(tiers)
    shrunk = sum(total(z, structured=True) for z in tiers) / len(tiers)
    assert round(total(0.5, structured=False) / 1e12, 1) == 1.4   # FLST
    assert round(masked / 1e12, 1) == 1.1                          # RCR-Dyn, and the paper's width methods
    assert round(shrunk / 1e12, 2) == 0.83                         # the width methods as the device runs them
    assert _close(masked / shrunk, 1.28, rel=0.01)


@pytest.mark.parametrize("name, shape, classes, per_client, paper", [
    ("vgg11", (3, 32, 32), 10, 2 * 100, 825.4e12),   # CIFAR-10: 2 shards x 100, batch 20
    ("vgg16", (3, 64, 64), 200, 20 * 40, 27081.0e12),  # Tiny-ImageNet: 20 shards x 40, batch 20
])
def test_fedlps_fedavg_vgg_training_flops(name, shape, classes, per_client, paper):
    """FedLPS Table I, FedAvg: CIFAR-10/VGG-11 825.4e12 and Tiny/VGG-16 27,081e12 total training FLOPs, with
    the same accounting as the MNIST test (FedLPS's 2-per-multiply-add count, no BatchNorm, 3 x forward,
    full batches of 20, 5 epochs x 10 clients x 100 rounds). Both match to 0.01%; the testbed's count x 2 is
    within 0.5% (it adds fvcore's 5 FLOPs per BatchNorm element, FedLPS its bias adds).
    Not checked: Reddit (10.5e12) needs per-client sentence counts we do not have, and FedLPS's LSTM hook
    counts one time step per batch (and the embedding as a dense 2*V*E matmul per token)."""
    model, x = MODELS[name](shape, classes, 1.0), torch.zeros(1, *shape)
    samples = _fedlps_samples(per_client, 20)
    assert _close(3 * fedlps_forward_flops(model, x) * samples, paper, rel=0.005)
    assert _close(FLOPS_PER_MULTIPLY_ADD * training_flops(forward_flops_per_sample(model, x), samples), paper, rel=0.02)


def test_fedlps_fedavg_cifar100_training_flops_count_a_64x64_input():
    """FedLPS Table I, FedAvg on CIFAR-100/VGG-13: 4,934.3e12. With CIFAR's 32x32 input and the script's split
    (10 shards x 20 images, batch 20) the same accounting gives only 1,233.6e12, 4.0x less. The factor 4 is
    the pixel count: counted on a 64x64 input (Tiny-ImageNet's size; VGG-13 then ends in Linear(2048 -> 100))
    it gives 4,934.26e12, the paper's figure to five digits. So FedLPS's CIFAR-100 FLOPs were counted at
    64x64 (its counter or loader used the Tiny input size); our vgg13 reference stays at CIFAR's 32x32."""
    samples = _fedlps_samples(10 * 20, 20)
    at_32 = 3 * fedlps_forward_flops(MODELS["vgg13"]((3, 32, 32), 100, 1.0), torch.zeros(1, 3, 32, 32)) * samples
    model_64, x_64 = MODELS["vgg13"]((3, 64, 64), 100, 1.0), torch.zeros(1, 3, 64, 64)
    at_64 = 3 * fedlps_forward_flops(model_64, x_64) * samples
    assert _close(at_32 * 4, 4934.3e12, rel=0.005) and not _close(at_32, 4934.3e12, rel=0.5)
    assert _close(at_64, 4934.3e12, rel=0.001)
    assert _close(FLOPS_PER_MULTIPLY_ADD * training_flops(forward_flops_per_sample(model_64, x_64), samples),
                  4934.3e12, rel=0.02)
