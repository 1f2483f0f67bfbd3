"""prunable_layers: every Conv/Linear/LSTM/Embedding weight except the classifier's, with its dim-0 unit count."""
import pytest
from torch import nn

from testbed.models import MODELS
from testbed.models.summary import REFERENCE_INPUTS, build_reference
from testbed.models.units import MASKABLE, prunable_layers


def test_feddumap_cnn_by_hand():
    model = MODELS["cnn_feddumap"]((3, 32, 32), 10, 1.0)
    # conv 32, 64, 64 output channels; fc1 64 neurons; fc2 (64 -> 10) is the classifier
    assert prunable_layers(model) == {"conv1.weight": 32, "conv2.weight": 64, "conv3.weight": 64, "fc1.weight": 64}


def test_tied_lstm_language_model_by_hand():
    model = MODELS["lstm_lm"]((10,), 10_000, 1.0)
    # embedding rows = vocabulary; LSTM rows = 4 gates x hidden (4*256, then 4*200); the decoder shares the
    # embedding matrix, so it is not a separate weight, and the embedding stays maskable (FedLPS §1.1)
    assert prunable_layers(model) == {
        "encoder.weight": 10_000,
        "rnn1.weight_ih_l0": 1024, "rnn1.weight_hh_l0": 1024,
        "rnn2.weight_ih_l0": 800, "rnn2.weight_hh_l0": 800,
    }


def test_two_layer_char_lstm_by_hand():
    model = MODELS["char_lstm"]((80,), 80, 0.5)
    assert prunable_layers(model) == {
        "embedding.weight": 80,
        "lstm.weight_ih_l0": 512, "lstm.weight_hh_l0": 512,
        "lstm.weight_ih_l1": 512, "lstm.weight_hh_l1": 512,
    }


def test_resnet18_includes_shortcut_convs_and_no_norms():
    units = prunable_layers(MODELS["resnet18"]((3, 32, 32), 10, 1.0))
    assert len(units) == 1 + 16 + 3  # stem, 8 blocks x 2 convs, 3 projection shortcuts
    assert units["layers.2.shortcut.0.weight"] == 128 and units["layers.7.conv2.weight"] == 512
    assert "fc.weight" not in units
    assert not any("norm" in n or n.endswith("bias") for n in units)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_only_the_classifier_is_left_out(name):
    model, _ = build_reference(name)
    units = prunable_layers(model)
    params = dict(model.named_parameters())
    for n, count in units.items():
        assert params[n].dim() >= 2 and params[n].shape[0] == count
    layers = [m for m in model.modules() if isinstance(m, MASKABLE)]
    classifier = layers[-1]
    assert isinstance(classifier, nn.Linear) and classifier.out_features == REFERENCE_INPUTS[name].num_classes
    maskable_weights = {n for n, p in params.items() if p.dim() >= 2}
    left_out = maskable_weights - set(units)
    if name == "lstm_lm":
        assert left_out == set()  # the classifier's weight is the (maskable) embedding
    else:
        assert left_out == {n for n, p in params.items() if p is classifier.weight}

