"""testbed/submodel.py: unit-mask patterns, update masks and submodel FLOPs, all checked against hand values."""
import numpy as np
import pytest
import torch
from torch import nn

from testbed.flops import forward_flops_per_sample
from testbed.models import MODELS
from testbed.models.cnn import CNN512, FedLPSCNN
from testbed.models.units import prunable_layers
from testbed.payload import UnitMasked, transmit
from testbed.submodel import (SubmodelCosts, entry_masks, keep_count, structure, submodel_flops, unit_masks,
                              update_mask)


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
    with pytest.raises(NotImplementedError, match="feed-forward"):
        structure(model, torch.zeros(1, 80, dtype=torch.long), masks)


def test_fvcore_count_is_traced_once_per_model_and_sample_shape(monkeypatch):
    import testbed.submodel as submodel

    calls = []
    monkeypatch.setattr(submodel, "flop_counts", lambda model, example: calls.append(example.shape) or (1, {}))
    model = FedLPSCNN()
    masks = _ordered(model, 0.5)
    for structured in (False, True, True):
        submodel_flops(model, EXAMPLE, masks, structured=structured)
    submodel_flops(model, EXAMPLE.repeat(4, 1, 1, 1), masks, structured=False)  # the batch size does not matter
    assert len(calls) == 1
    submodel_flops(model, torch.zeros(1, 1, 32, 32), masks, structured=False)
    submodel_flops(FedLPSCNN(), EXAMPLE, masks, structured=False)
    assert len(calls) == 3


def _first(n, k):
    return torch.arange(n) < k


def test_structure_of_fedlps_cnn_at_half_by_hand():
    model = MODELS["cnn_fedlps"]((1, 28, 28), 10, 1.0)
    struct = structure(model, EXAMPLE, _ordered(model, 0.5))
    assert list(struct) == [f"{layer}.{p}" for layer in ("conv1", "conv2", "fc1", "fc2") for p in ("weight", "bias")]
    expected = {  # (kept rows, live columns) of each weight: rows 5/10, 10/20, 25/50, and all 10 classes
        "conv1": (_first(10, 5), _first(1, 1)),     # the image channel
        "conv2": (_first(20, 10), _first(10, 5)),   # the 5 kept conv1 channels
        "fc1": (_first(50, 25), _first(320, 160)),  # 10 kept conv2 channels x 4 x 4 positions, flattened (C, H, W)
        "fc2": (_first(10, 10), _first(50, 25)),    # the 25 kept fc1 units
    }
    for layer, (rows, cols) in expected.items():
        assert torch.equal(struct[f"{layer}.weight"][0], rows) and torch.equal(struct[f"{layer}.weight"][1], cols)
        assert torch.equal(struct[f"{layer}.bias"][0], rows) and struct[f"{layer}.bias"][1] is None
    entries = entry_masks(dict(model.named_parameters()), struct)
    assert entries["fc1.weight"].shape == (50, 320) and int(entries["fc1.weight"].sum()) == 25 * 160
    assert int(entries["conv2.weight"].sum()) == 10 * 5 * 25 and entries["conv2.weight"][0, 5].sum() == 0


def test_structured_payload_of_fedlps_cnn_at_half_by_hand():
    model = FedLPSCNN()
    params = {name: p.detach() for name, p in model.named_parameters()}
    struct = structure(model, EXAMPLE, _ordered(model, 0.5))
    codec = UnitMasked.structured(struct)
    assert set(codec.masks) == {"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight", "fc1.bias"}
    assert set(codec.columns) == {"conv2.weight", "fc1.weight", "fc2.weight"}  # conv1 reads the whole image
    # bitmasks: conv1 rows ceil(10/8) = 2 (weight) + 2 (bias); conv2 rows 3 + 3, columns ceil(10/8) = 2;
    # fc1 rows ceil(50/8) = 7 + 7, columns ceil(320/8) = 40; fc2 columns ceil(50/8) = 7; fc2.bias dense
    bitmasks = 2 + 2 + 3 + 3 + 2 + 7 + 7 + 40 + 7
    # entries: conv1 5x1x25 + 5, conv2 10x5x25 + 10, fc1 25x160 + 25, fc2 10x25 + 10 (= FedLPSCNN(width=0.5))
    entries = 125 + 5 + 1250 + 10 + 4000 + 25 + 250 + 10
    assert bitmasks == 73 and entries == 5675 == sum(p.numel() for p in FedLPSCNN(width=0.5).parameters())
    shapes = {name: p.shape for name, p in params.items()}
    assert codec.nbytes(shapes) == 73 + 4 * 5675 == 22_773
    assert UnitMasked.structured(struct, "float16").nbytes(shapes) == 73 + 2 * 5675 == 11_423
    out = transmit(codec, params)  # checks the encoded size against nbytes
    keep = entry_masks(params, struct)
    for name, p in params.items():
        assert torch.equal(out[name], p * keep[name]), name  # kept entries exact, dropped ones zero


def test_full_structure_travels_dense():
    model = FedLPSCNN()
    codec = UnitMasked.structured(structure(model, EXAMPLE, _ordered(model, 1.0)))
    assert codec.masks == {} and codec.columns == {}


def _shrunk_copy(small: nn.Module, big: nn.Module, struct) -> nn.Module:
    """`small` with every parameter copied from `big`'s kept rows and live columns."""
    big_params = dict(big.named_parameters())
    with torch.no_grad():
        for name, p in small.named_parameters():
            rows, cols = struct[name]  # every parameter of these models is sliced
            t = big_params[name][rows]
            p.copy_(t if cols is None else t[:, cols])
    return small


def _masked_logits(model, struct, x):
    params = dict(model.named_parameters())
    keep = entry_masks(params, struct)
    masked = {name: p * keep[name] if name in keep else p for name, p in params.items()}
    return torch.func.functional_call(model, masked, (x,))


@pytest.mark.parametrize("pattern, kw", [("ordered", {}), ("random", {"rng": np.random.default_rng(5)})])
def test_entry_masks_run_the_width_scaled_fedlps_cnn(pattern, kw):
    torch.manual_seed(0)
    model = MODELS["cnn_fedlps"]((1, 28, 28), 10, 1.0)
    params = dict(model.named_parameters())
    struct = structure(model, EXAMPLE, unit_masks(params, prunable_layers(model), 0.5, pattern, **kw))
    small = _shrunk_copy(MODELS["cnn_fedlps"]((1, 28, 28), 10, 0.5), model, struct)
    x = torch.randn(4, 1, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(_masked_logits(model, struct, x), small(x))


def test_structure_of_vgg11_at_quarter_keeps_the_live_batchnorm_channels():
    torch.manual_seed(0)
    model = MODELS["vgg11"]((3, 32, 32), 10, 1.0)
    masks = _ordered(model, 0.25)
    struct = structure(model, torch.zeros(1, 3, 32, 32), masks)
    convs = [(i, m) for i, m in enumerate(model.features) if isinstance(m, nn.Conv2d)]
    assert [m.out_channels for _, m in convs] == [64, 128, 256, 256, 512, 512, 512, 512]
    in_kept = 3  # the image's channels
    for i, conv in convs:
        kept = conv.out_channels // 4
        rows, cols = struct[f"features.{i}.weight"]
        assert torch.equal(rows, _first(conv.out_channels, kept))
        assert torch.equal(cols, _first(conv.in_channels, in_kept))
        for p in ("weight", "bias"):  # the BatchNorm right after the conv holds its kept channels only
            channels, none = struct[f"features.{i + 1}.{p}"]
            assert torch.equal(channels, _first(conv.out_channels, kept)) and none is None
        in_kept = kept
    rows, cols = struct["classifier.weight"]  # 512 x 1 x 1 features at 32x32: 128 live, all 10 classes kept
    assert torch.equal(rows, _first(10, 10)) and torch.equal(cols, _first(512, 128))
    codec = UnitMasked.structured(struct)
    assert "features.1.weight" in codec.masks and "classifier.weight" not in codec.masks
    small = _shrunk_copy(MODELS["vgg11"]((3, 32, 32), 10, 0.25), model, struct)
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():  # batch statistics in eval too: dead channels are 0 and stay 0 through their zeroed BN
        torch.testing.assert_close(_masked_logits(model, struct, x), small(x))


def test_groupnorm_kills_no_live_channel_in_the_probe():
    """GroupNorm normalizes a channel against its group, so on the probe's positive features it would send some
    live channels below zero, where ReLU kills them (126 of 128 classifier inputs found live before the fix)."""
    model = MODELS["vgg11_gn"]((3, 32, 32), 10, 1.0)
    example = torch.zeros(1, 3, 32, 32)
    masks = _ordered(model, 0.25)
    assert torch.equal(structure(model, example, masks)["classifier.weight"][1], _first(512, 128))
    expected = forward_flops_per_sample(MODELS["vgg11_gn"]((3, 32, 32), 10, 0.25), example)
    assert submodel_flops(model, example, masks, structured=True) == expected


def test_submodel_costs_answer_for_the_model_and_one_sample():
    model = FedLPSCNN()
    costs = SubmodelCosts(model, torch.zeros(16, 1, 28, 28))
    assert costs.units == {"conv1.weight": 10, "conv2.weight": 20, "fc1.weight": 50}
    masks = _ordered(model, 0.5)
    assert costs.forward_flops(masks, structured=True) == 72000 + 80000 + 4000 + 250
    assert costs.forward_flops(masks, structured=False) == 72000 + 160000 + 8000 + 500
    assert int(costs.structure(masks)["fc1.weight"][1].sum()) == 160


def test_kept_flops_of_a_two_layer_model_by_hand_follow_kept_outputs_and_live_inputs():
    # Linear(4, 6) -> ReLU -> Linear(6, 3), the last layer the classifier (never masked). Keep 3 of the 6 hidden
    # units: layer 1 holds 3 rows of 4 weights, 12 multiply-adds instead of 24. Masking its rows only (FedLPS:
    # weights masked, biases kept, so a masked unit still feeds layer 2 its bias) leaves layer 2 whole, 6 x 3 = 18;
    # shrinking (HeteroFL and the others: the unit gone, bias and all) removes its 3 inputs of layer 2 too, 3 x 3 = 9.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    example = torch.randn(1, 4)
    masks = unit_masks(dict(model.named_parameters()), prunable_layers(model), 0.5, "ordered")
    assert {n: int(m.sum()) for n, m in masks.items()} == {"0.weight": 3}
    assert forward_flops_per_sample(model, example) == 24 + 18
    assert submodel_flops(model, example, masks, structured=False) == 12 + 18
    assert submodel_flops(model, example, masks, structured=True) == 12 + 9
