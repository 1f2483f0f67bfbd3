"""Recurrent language models. Inputs are int64 token windows (N, T); outputs are logits (N, V) for the token
after the window, read from the last position. `width` multiplies the LSTM hidden sizes; embedding sizes
stay fixed (for lstm_lm the tied decoder needs embedding size = last hidden size, so that one stays too, as in
FedLPS's code, which scales only rnn_hidden).
"""
from __future__ import annotations

import torch
from torch import nn

from testbed.models.cnn import _scaled


class CharLSTM(nn.Module):
    """LEAF's / FedAvg's Shakespeare model: Embedding(V, 8) -> 2-layer LSTM(256) -> Linear(256 -> V) on the
    last position (LEAF models/shakespeare/stacked_lstm.py; V = 80 characters, windows of 80).
    819,920 parameters at V = 80 (PyTorch keeps two bias vectors per LSTM layer where TensorFlow keeps one)."""

    def __init__(self, sample_shape=(80,), num_classes=80, width: float = 1.0):
        super().__init__()
        hidden = _scaled(256, width)
        self.embedding = nn.Embedding(num_classes, 8)
        self.lstm = nn.LSTM(8, hidden, num_layers=2, batch_first=True)
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embedding(tokens))
        return self.fc(out[:, -1])


class LSTMLanguageModel(nn.Module):
    """FedLPS's Reddit model (its Models.py RNNModel with tie_weights): Embedding(V, 200) -> LSTM(200 -> 256) ->
    LSTM(256 -> 200) -> Linear(200 -> V), the decoder's weight being the embedding matrix (one parameter,
    listed once, as `encoder.weight`). FedLPS decodes every position; the testbed's task predicts the token
    after the window, so we decode the last position only (the same parameters; fewer decoder FLOPs)."""

    def __init__(self, sample_shape=(10,), num_classes=10_000, width: float = 1.0, embed: int = 200):
        super().__init__()
        hidden = _scaled(256, width)
        self.encoder = nn.Embedding(num_classes, embed)
        self.rnn1 = nn.LSTM(embed, hidden, batch_first=True)
        self.rnn2 = nn.LSTM(hidden, embed, batch_first=True)
        self.decoder = nn.Linear(embed, num_classes)
        self.decoder.weight = self.encoder.weight  # tied; the embedding keeps nn.Embedding's N(0, 1) init
        nn.init.zeros_(self.decoder.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn1(self.encoder(tokens))
        out, _ = self.rnn2(out)
        return self.decoder(out[:, -1])
