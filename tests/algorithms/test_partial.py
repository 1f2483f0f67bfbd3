"""PartialModel.configure on FedLPS's MNIST CNN (conv1 10, conv2 20, fc1 50 units; fc2 the classifier) with a
fleet whose capability tiers are known: each method's ratio, its submodel's FLOPs and bytes by hand (see
tests/submodel/test_submodel.py for the counts at ratio 0.5), and its pattern of units."""
import numpy as np
import pytest
import torch

from testbed.algorithms import EUCB, CapabilityRatio, LevelsUpToCapability, PartialModel, RoundContext, ServerState
from testbed.flops import forward_flops_per_sample
from testbed.local import LocalSGD
from testbed.models import MODELS
from testbed.payload import Dense
from testbed.submodel import SubmodelCosts

EXAMPLE = torch.zeros(1, 1, 28, 28)


class TierFleet:
    """Only what configure reads of a fleet: every device's capability tier in a round."""

    def __init__(self, tiers):
        self.tiers = np.asarray(tiers, dtype=float)

    def tier_at(self, round):
        return self.tiers


@pytest.fixture(scope="module")
def cnn():
    torch.manual_seed(0)
    model = MODELS["cnn_fedlps"]((1, 28, 28), 10, 1.0)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    return SubmodelCosts(model, EXAMPLE), params


def _tasks(cnn, tiers, round=1, pattern="ordered", ratios=None, seed=0):
    costs, params = cnn
    strategy = PartialModel(LocalSGD(lr=0.1), costs, pattern, ratios or CapabilityRatio())
    n = len(tiers)
    ctx = RoundContext(round, np.arange(n), n, np.full(n, 100), TierFleet(tiers), np.random.default_rng(seed))
    return strategy.configure(ServerState(params), ctx, np.random.default_rng(seed))


def _units(task, name):
    return torch.nonzero(task.down.masks[name]).flatten().tolist()


def test_heterofl_task_costs_the_width_scaled_model(cnn):
    shapes = {n: p.shape for n, p in cnn[1].items()}
    half, full = _tasks(cnn, [0.5, 1.0])
    assert (half.device, half.ratio, full.ratio) == (0, 0.5, 1.0)
    # conv1 5*1*25*24*24 = 72,000; conv2 10*5*25*8*8 = 80,000; fc1 160*25 = 4,000; fc2 25*10 = 250
    assert half.forward_flops == 72_000 + 80_000 + 4_000 + 250 == 156_250
    assert half.forward_flops == forward_flops_per_sample(MODELS["cnn_fedlps"]((1, 28, 28), 10, 0.5), EXAMPLE)
    assert full.forward_flops == 480_500
    # 73 bytes of row and column bitmasks + the 5,675 parameters of the half-width CNN in fp32
    assert half.down.nbytes(shapes) == half.up.nbytes(shapes) == 73 + 4 * 5_675 == 22_773
    assert full.down.nbytes(shapes) == Dense().nbytes(shapes) == 87_360  # nothing dropped: no bitmask
    assert _units(half, "conv1.weight") == [0, 1, 2, 3, 4] and _units(half, "fc1.weight") == list(range(25))
    held = half.extras["held"]  # the entries the device holds, and trains
    assert int(held["conv2.weight"].sum()) == 10 * 5 * 25 and int(held["fc1.weight"].sum()) == 25 * 160
    assert int(held["fc2.weight"].sum()) == 10 * 25 and held["fc2.bias"].tolist() == [1.0] * 10


def test_fedrolex_window_rolls_with_the_round(cnn):
    shapes = {n: p.shape for n, p in cnn[1].items()}
    first = _tasks(cnn, [0.5], round=1, pattern="rolling")[0]
    second = _tasks(cnn, [0.5], round=2, pattern="rolling")[0]
    eighth = _tasks(cnn, [0.5], round=8, pattern="rolling")[0]
    assert _units(first, "conv1.weight") == [1, 2, 3, 4, 5]
    assert _units(second, "conv1.weight") == [2, 3, 4, 5, 6]
    assert _units(eighth, "conv1.weight") == [0, 1, 2, 8, 9]         # 8, 9, then wraps to 0, 1, 2
    assert _units(second, "conv2.weight") == list(range(2, 12)) and _units(second, "fc1.weight") == list(range(2, 27))
    # the next layer reads exactly the kept channels: conv2's live inputs are conv1's window
    assert torch.nonzero(second.down.columns["conv2.weight"]).flatten().tolist() == [2, 3, 4, 5, 6]
    for task in (first, second, eighth):  # same counts, same cost as HeteroFL's first units
        assert task.ratio == 0.5 and task.forward_flops == 156_250 and task.up.nbytes(shapes) == 22_773


def test_efd_draws_other_units_for_each_device(cnn):
    a, b = _tasks(cnn, [0.5, 0.5], pattern="random")
    assert a.ratio == b.ratio == 0.5
    assert [len(_units(t, "conv1.weight")) for t in (a, b)] == [5, 5]
    assert any(_units(a, n) != _units(b, n) for n in ("conv1.weight", "conv2.weight", "fc1.weight"))
    assert a.forward_flops == b.forward_flops == 156_250
    again = _tasks(cnn, [0.5, 0.5], pattern="random")  # the strategy's stream: the same draw for the same seed
    assert all(_units(x, "fc1.weight") == _units(y, "fc1.weight") for x, y in zip((a, b), again))


def test_fjord_ratio_is_a_level_that_fits_the_tier(cnn):
    tiers = [0.5, 0.25, 1.0, 0.0625, 0.5, 0.25]
    seen = set()
    for seed in range(4):
        for t, tier in zip(_tasks(cnn, tiers, ratios=LevelsUpToCapability(), seed=seed), tiers):
            assert t.ratio in (0.0625, 0.125, 0.25, 0.5, 1.0) and t.ratio <= tier
            seen.add((tier, t.ratio))
    assert (0.0625, 0.0625) in seen and any(tier == 1.0 and s < 1.0 for tier, s in seen)  # not always the tier


def test_fedmp_keeps_the_units_of_largest_norm(cnn):
    _, params = cnn
    task = _tasks(cnn, [1.0], pattern="magnitude", ratios=EUCB())[0]
    assert 0.2 <= task.ratio < 1.0  # E-UCB's arm space, uncapped
    norms = params["conv1.weight"].abs().flatten(1).sum(1)
    k = max(int(task.ratio * 10), 1)
    assert _units(task, "conv1.weight") == sorted(norms.argsort(descending=True)[:k].tolist())
