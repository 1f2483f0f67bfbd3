"""testbed/submodel.py: unit-mask patterns, update masks and submodel FLOPs, all checked against hand values."""
import numpy as np
import pytest
import torch
from torch import nn

from testbed.flops import forward_flops_per_sample
from testbed.models import MODELS
from testbed.models.cnn import CNN512, FedLPSCNN
from testbed.models.units import prunable_layers
from testbed.submodel import keep_count, submodel_flops, unit_masks, update_mask


def _idx(mask):
    return sorted(torch.nonzero(mask).flatten().tolist())


def test_keep_count_by_hand():
    assert keep_count(10, 0.5) == 5
    assert keep_count(10, 0.25) == 2  # int(2.5)
    assert keep_count(50, 0.0625) == 3  # int(3.125)
    assert keep_count(3, 0.1) == 1  # never zero
    assert keep_count(7, 1.0) == 7


# a hand-made 5-unit weight: row L1 norms 3, 10, 1, 7, 10
W = torch.tensor([[1.0, -2.0], [5.0, 5.0], [0.5, -0.5], [-7.0, 0.0], [-4.0, 6.0]])
PARAMS = {"w": W}
UNITS = {"w": 5}


def test_ordered_keeps_first_k():
    m = unit_masks(PARAMS, UNITS, 0.4, "ordered")["w"]
    assert m.dtype == torch.bool and m.shape == (5,)
    assert _idx(m) == [0, 1]
    assert _idx(unit_masks(PARAMS, UNITS, 0.6, "ordered")["w"]) == [0, 1, 2]


def test_rolling_window_wraps():
    assert _idx(unit_masks(PARAMS, UNITS, 0.4, "rolling", round=4)["w"]) == [0, 4]
    assert _idx(unit_masks(PARAMS, UNITS, 0.4, "rolling", round=1)["w"]) == [1, 2]
    assert _idx(unit_masks(PARAMS, UNITS, 0.6, "rolling", round=8)["w"]) == [0, 3, 4]  # 8 % 5 = 3: 3, 4, 0
    assert _idx(unit_masks(PARAMS, UNITS, 0.4, "rolling", round=0)["w"]) == [0, 1]


def test_random_is_seeded_and_has_k_units():
    units = {"a": 100, "b": 7}
    params = {"a": torch.zeros(100, 3), "b": torch.zeros(7)}
    m1 = unit_masks(params, units, 0.3, "random", rng=np.random.default_rng(0))
    m2 = unit_masks(params, units, 0.3, "random", rng=np.random.default_rng(0))
    m3 = unit_masks(params, units, 0.3, "random", rng=np.random.default_rng(1))
    assert int(m1["a"].sum()) == 30 and int(m1["b"].sum()) == 2
    assert torch.equal(m1["a"], m2["a"]) and torch.equal(m1["b"], m2["b"])
    assert not torch.equal(m1["a"], m3["a"])
    assert _idx(m1["a"]) != list(range(30))  # not simply the ordered pattern
    with pytest.raises(ValueError):
        unit_masks(params, units, 0.3, "random")


def test_magnitude_keeps_largest_l1_rows():
    # L1: 3, 10, 1, 7, 10 -> top-2 = rows 1 and 4 (tie at 10), top-3 adds row 3, top-1 takes the lower index
    assert _idx(unit_masks(PARAMS, UNITS, 0.4, "magnitude")["w"]) == [1, 4]
    assert _idx(unit_masks(PARAMS, UNITS, 0.6, "magnitude")["w"]) == [1, 3, 4]
    assert _idx(unit_masks(PARAMS, UNITS, 0.2, "magnitude")["w"]) == [1]
    # conv-shaped weight: L1 over all of a filter
    conv = torch.zeros(3, 2, 2, 2)
    conv[0] += 0.1
    conv[2, 1, 1, 1] = -5.0
    assert _idx(unit_masks({"c": conv}, {"c": 3}, 0.34, "magnitude")["c"]) == [2]


def test_learnable_keeps_top_k_scores_ties_by_index():
    scores = {"w": torch.tensor([0.2, 0.9, 0.5, 0.5, 0.1])}
    assert _idx(unit_masks(PARAMS, UNITS, 0.4, "learnable", scores=scores)["w"]) == [1, 2]  # 0.5 tie -> index 2
    assert _idx(unit_masks(PARAMS, UNITS, 0.6, "learnable", scores=scores)["w"]) == [1, 2, 3]
    with pytest.raises(ValueError):
        unit_masks(PARAMS, UNITS, 0.4, "learnable")


def test_unknown_pattern_lists_choices():
    with pytest.raises(ValueError, match="ordered.*rolling.*random.*magnitude.*learnable"):
        unit_masks(PARAMS, UNITS, 0.5, "bogus")


def test_update_mask_shape_and_rows():
    conv = torch.randn(4, 3, 2, 2)
    masks = {"c": torch.tensor([True, False, False, True]), "w": torch.tensor([False, True, False, False, True])}
    um = update_mask({"c": conv, "w": W}, masks)
    assert set(um) == {"c", "w"}
    assert um["c"].shape == (4, 3, 2, 2) and um["c"].dtype == torch.float32
    assert torch.equal(um["c"][0], torch.ones(3, 2, 2)) and torch.equal(um["c"][3], torch.ones(3, 2, 2))
    assert torch.equal(um["c"][1], torch.zeros(3, 2, 2)) and torch.equal(um["c"][2], torch.zeros(3, 2, 2))
    assert um["w"].tolist() == [[0, 0], [1, 1], [0, 0], [0, 0], [1, 1]]


def test_update_mask_on_model_covers_weights_only():
    model = FedLPSCNN()
    params = dict(model.named_parameters())
    um = update_mask(params, unit_masks(params, prunable_layers(model), 0.5, "ordered"))
    assert set(um) == {"conv1.weight", "conv2.weight", "fc1.weight"}  # no biases, no classifier
    assert um["fc1.weight"].shape == (50, 320) and int(um["fc1.weight"].sum()) == 25 * 320


EXAMPLE = torch.zeros(1, 1, 28, 28)


def _ordered(model, ratio):
    params = dict(model.named_parameters())
    return unit_masks(params, prunable_layers(model), ratio, "ordered")


def test_structured_ordered_half_equals_width_half_fedlps_cnn():
    model = FedLPSCNN()
    masks = _ordered(model, 0.5)
    assert [int(m.sum()) for m in masks.values()] == [5, 10, 25]  # conv1 5/10, conv2 10/20, fc1 25/50
    shrunk = forward_flops_per_sample(FedLPSCNN(width=0.5), EXAMPLE)
    # by hand: conv1 5*1*25*24*24 = 72000, conv2 10*5*25*8*8 = 80000, fc1 160*25 = 4000, fc2 25*10 = 250
    assert shrunk == 72000 + 80000 + 4000 + 250
    assert submodel_flops(model, EXAMPLE, masks, structured=True) == shrunk


def test_structured_ordered_quarter_equals_width_quarter_cnn512():
    model = CNN512()
    masks = _ordered(model, 0.25)
    # width rounding (round(32*.25)=8, 16, 128) agrees with keep_count (int(.25*32)=8, 16, 128)
    assert [int(m.sum()) for m in masks.values()] == [8, 16, 128]
    shrunk = forward_flops_per_sample(CNN512(width=0.25), EXAMPLE)
    assert submodel_flops(model, EXAMPLE, masks, structured=True) == shrunk


def test_structured_other_patterns_cost_the_same_as_ordered():
    model = FedLPSCNN()
    params = dict(model.named_parameters())
    units = prunable_layers(model)
    expected = forward_flops_per_sample(FedLPSCNN(width=0.5), EXAMPLE)
    for pattern, kw in [("rolling", {"round": 7}), ("random", {"rng": np.random.default_rng(3)}),
                        ("magnitude", {})]:
        masks = unit_masks(params, units, 0.5, pattern, **kw)
        assert submodel_flops(model, EXAMPLE, masks, structured=True) == expected, pattern


def test_mask_only_flops_by_hand():
    model = FedLPSCNN()
    masks = _ordered(model, 0.5)
    # full: conv1 144000, conv2 320000, fc1 16000, fc2 500; output-unit masking halves the first three only
    assert forward_flops_per_sample(model, EXAMPLE) == 144000 + 320000 + 16000 + 500
    assert submodel_flops(model, EXAMPLE, masks, structured=False) == 72000 + 160000 + 8000 + 500
    # ratio 0.3: keep 3/10, 6/20, 15/50
    masks = _ordered(model, 0.3)
    assert submodel_flops(model, EXAMPLE, masks, structured=False) == 43200 + 96000 + 4800 + 500


def test_full_masks_cost_the_full_model():
    model = FedLPSCNN()
    masks = _ordered(model, 1.0)
    full = forward_flops_per_sample(model, EXAMPLE)
    assert submodel_flops(model, EXAMPLE, masks, structured=True) == full
    assert submodel_flops(model, EXAMPLE, masks, structured=False) == full


def test_structured_batchnorm_does_not_revive_pruned_channels():
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.Flatten(),
                          nn.Linear(4 * 4 * 4, 3))
    with torch.no_grad():
        model[1].bias.fill_(1.0)  # a dead channel would come out of BN as 1 without the guard
    example = torch.zeros(1, 1, 8, 8)
    masks = {"0.weight": torch.tensor([True, True, False, False]), "3.weight": torch.tensor([True, False, False, False])}
    # conv0: 4*9*36 = 1296 -> half out = 648; conv3: 4*4*9*16 = 2304 -> 1/4 out, 1/2 in = 288;
    # linear 64*3 = 192 -> 16/64 inputs alive = 48. fvcore also charges BN per element: 2 of its 4 channels live.
    flops = submodel_flops(model, example, masks, structured=True)
    from testbed.flops import flop_counts
    _, by_module = flop_counts(model, example)
    assert by_module["1"] > 0 and by_module["1"] % 2 == 0
    assert flops == 648 + 288 + 48 + by_module["1"] // 2


def test_structured_rejects_recurrent_models():
    model = MODELS["char_lstm"]((80,), 80, 0.25)
    params = dict(model.named_parameters())
    masks = unit_masks(params, prunable_layers(model), 0.5, "ordered")
    with pytest.raises(NotImplementedError, match="feed-forward"):
        submodel_flops(model, torch.zeros(1, 80, dtype=torch.long), masks, structured=True)
