"""Model zoo: name -> factory(sample_shape, num_classes, width) -> nn.Module.

`sample_shape` is one input sample without the batch dimension ((C, H, W) images, (C, T) signal windows or
(T,) token windows), `num_classes` the classifier's output size (the vocabulary for language models), and `width`
multiplies hidden channels and units. summary.py gives each model its papers' reference input; units.py lists the
weights that submodel methods may mask.
"""
from testbed.models.mlp import MLP, LogisticRegression
from testbed.models.cnn import CNN512, FedAdamSSMCNN, FedDUMAPCNN, FedLionCNN, FedLPSCNN, LeNet5
from testbed.models.cnn1d import HARCNN
from testbed.models.resnet import ResNet18, ResNet20
from testbed.models.rnn import CharLSTM, LSTMLanguageModel
from testbed.models.vgg import VGG, VGG11, VGG13, VGG16
from testbed.names import MODELS   # imported where first looked up, so that the schema needs no torch

__all__ = [
    "MODELS", "CNN512", "FedLPSCNN", "FedDUMAPCNN", "LeNet5", "FedAdamSSMCNN", "FedLionCNN", "HARCNN",
    "VGG", "VGG11", "VGG13", "VGG16", "ResNet18", "ResNet20", "CharLSTM", "LSTMLanguageModel",
    "MLP", "LogisticRegression",
]
