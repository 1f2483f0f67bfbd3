"""The recurrent-layer FLOP handle in testbed/flops.py, and the model table."""
import pytest
import torch
from torch import nn

from testbed.flops import forward_flops_per_sample
from testbed.models import MODELS
from testbed.models.summary import build_reference, format_table, model_table


class _Recurrent(nn.Module):
    """Takes batch-first input (forward_flops_per_sample slices one sample off dim 0); `seq_first` transposes it."""

    def __init__(self, rnn: nn.Module, seq_first: bool = False):
        super().__init__()
        self.rnn, self.seq_first = rnn, seq_first

    def forward(self, x):
        return self.rnn(x.transpose(0, 1) if self.seq_first else x)[0]


def test_lstm_counts_gate_matmuls_per_step_and_layer():
    # per step: layer 1 4H(I+H), layer 2 4H(H+H); biases and elementwise gate work are not counted
    T, I, H = 7, 5, 6
    model = _Recurrent(nn.LSTM(I, H, num_layers=2, batch_first=True))
    assert forward_flops_per_sample(model, torch.zeros(3, T, I)) == T * (4 * H * (I + H) + 4 * H * (H + H))


@pytest.mark.filterwarnings("ignore:LSTM with projections")
def test_sequence_first_bidirectional_projected_lstm_and_gru():
    T, I, H, P = 4, 3, 8, 2
    lstm = _Recurrent(nn.LSTM(I, H, num_layers=2, bidirectional=True, proj_size=P), seq_first=True)
    # each direction: W_ih 4H x in, W_hh 4H x P, W_hr P x H; layer 2's input is 2P (both directions)
    per_step = 2 * (4 * H * I + 4 * H * P + P * H) + 2 * (4 * H * 2 * P + 4 * H * P + P * H)
    assert forward_flops_per_sample(lstm, torch.zeros(3, T, I)) == T * per_step
    gru = _Recurrent(nn.GRU(I, H, batch_first=True))
    assert forward_flops_per_sample(gru, torch.zeros(1, T, I)) == T * 3 * H * (I + H)


def test_char_lstm_by_hand():
    # 80 steps x (4*256*(8+256) + 4*256*(256+256)) + the output layer on the last step; the embedding is 0
    by_hand = 80 * (4 * 256 * 264 + 4 * 256 * 512) + 256 * 80
    assert forward_flops_per_sample(MODELS["char_lstm"]((80,), 80, 1.0), torch.zeros(1, 80, dtype=torch.long)) == by_hand
    assert by_hand == 63_590_400


def test_lstm_lm_by_hand():
    # 10 steps x (4*256*(200+256) + 4*200*(256+200)) + tied decoder 200 x 10,000 on the last position
    by_hand = 10 * (4 * 256 * 456 + 4 * 200 * 456) + 200 * 10_000
    model = MODELS["lstm_lm"]((10,), 10_000, 1.0)
    assert forward_flops_per_sample(model, torch.zeros(1, 10, dtype=torch.long)) == by_hand == 10_317_440


def test_conv1d_counts_output_positions_times_kernel_and_channels():
    # 'valid' conv, stride 2: (20 - 3) // 2 + 1 = 9 positions x 4 out x 5 in x 3 taps
    model = nn.Conv1d(5, 4, 3, stride=2)
    assert forward_flops_per_sample(model, torch.zeros(2, 5, 20)) == 9 * 4 * 5 * 3


def test_cnn1d_har_by_hand():
    # 'same' convs of kernel 5 on 128 -> 64 -> 32 steps (each followed by maxpool 2, uncounted), then the head
    convs = 128 * 32 * 6 * 5 + 64 * 64 * 32 * 5 + 32 * 64 * 64 * 5
    by_hand = convs + 64 * 16 * 64 + 64 * 6
    model = MODELS["cnn1d_har"]((6, 128), 6, 1.0)
    assert forward_flops_per_sample(model, torch.zeros(1, 6, 128)) == by_hand == 1_499_520
    assert sum(p.numel() for p in model.parameters()) == (6 * 32 * 5 + 32) + (32 * 64 * 5 + 64) + (
        64 * 64 * 5 + 64) + (1024 * 64 + 64) + (64 * 6 + 6) == 97_830


def test_embedding_lookup_counts_zero():
    model = nn.Sequential(nn.Embedding(100, 4), nn.Flatten(), nn.Linear(12, 2))
    assert forward_flops_per_sample(model, torch.zeros(1, 3, dtype=torch.long)) == 12 * 2


def test_model_table_rows():
    rows = {r["name"]: r for r in model_table()}
    assert set(rows) == set(MODELS)
    assert rows["cnn_fedlion"]["parameters"] == 26_010
    assert rows["cnn_feddumap"]["forward_flops"] == 4_548_608
    assert rows["lstm_lm"]["parameters"] == 2_845_392  # tied decoder weight counted once
    assert all(r["parameters"] > 0 and r["forward_flops"] > 0 and r["input"] for r in rows.values())
    text = format_table(list(rows.values()))
    assert "vgg16" in text and "1,258,725,376" in text


@pytest.mark.parametrize("name", ["vgg11", "resnet20"])
def test_flops_shrink_with_width(name):
    full, x = build_reference(name)
    half, _ = build_reference(name, 0.5)
    assert forward_flops_per_sample(half, x) < 0.3 * forward_flops_per_sample(full, x)
