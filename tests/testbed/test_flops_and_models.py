import pytest
import torch

from testbed.flops import compute_seconds, forward_flops_per_sample, training_flops
from testbed.models import CNN512, FedLPSCNN


def test_fedlps_cnn_forward_multiply_adds_by_hand():
    # conv1 10 maps 24x24, 5x5x1 each; conv2 20 maps 8x8, 5x5x10 each; fc 320x50 + 50x10
    by_hand = 10 * 24 * 24 * 25 + 20 * 8 * 8 * 250 + 320 * 50 + 50 * 10
    assert forward_flops_per_sample(FedLPSCNN(), torch.zeros(1, 1, 28, 28)) == by_hand == 480_500


def test_cnn512_shapes_and_parameters():
    model = CNN512()
    assert model(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert model.fc1.in_features == 1024
    assert sum(p.numel() for p in model.parameters()) == 832 + 51264 + 524800 + 5130


def test_width_multiplier_scales_units():
    model = FedLPSCNN(width=0.5)
    assert (model.conv1.out_channels, model.conv2.out_channels, model.fc1.out_features) == (5, 10, 25)


def test_training_flops_and_compute_time():
    assert training_flops(1000, 50) == 150_000
    assert compute_seconds(150_000, 3e5) == 1.0  # two FLOPs per multiply-add
    with pytest.raises(ValueError, match="compute time"):
        compute_seconds(0, 1e9)
