"""Model zoo: name -> factory(sample_shape, num_classes, width) -> nn.Module.

`sample_shape` is one input sample without the batch dimension ((C, H, W) images, (C, T) signal windows or
(T,) token windows), `num_classes` the classifier's output size (the vocabulary for language models), and `width`
multiplies hidden channels and units. summary.py gives each model its papers' reference input; units.py lists the
weights that submodel methods may mask.
"""
from functools import partial

from testbed.models.mlp import MLP, LogisticRegression
from testbed.models.cnn import CNN512, FedAdamSSMCNN, FedDUMAPCNN, FedLionCNN, FedLPSCNN, LeNet5
from testbed.models.cnn1d import HARCNN
from testbed.models.resnet import ResNet18, ResNet20
from testbed.models.rnn import CharLSTM, LSTMLanguageModel
from testbed.models.vgg import VGG, VGG11, VGG13, VGG16

MODELS = {
    "cnn_fedlps": FedLPSCNN,
    "cnn_512": CNN512,
    "cnn_feddumap": FedDUMAPCNN,
    "lenet5": LeNet5,
    "cnn_fedadam_ssm": FedAdamSSMCNN,
    "cnn_fedlion": FedLionCNN,
    "vgg11": VGG11,
    "vgg13": VGG13,
    "vgg16": VGG16,
    "vgg11_gn": partial(VGG11, norm="gn"),
    "vgg13_gn": partial(VGG13, norm="gn"),
    "vgg16_gn": partial(VGG16, norm="gn"),
    "resnet18": ResNet18,
    "resnet20": ResNet20,
    "cnn1d_har": HARCNN,
    "char_lstm": CharLSTM,
    "lstm_lm": LSTMLanguageModel,
    "mlp": MLP,
    "logreg": LogisticRegression,
}

__all__ = [
    "MODELS", "CNN512", "FedLPSCNN", "FedDUMAPCNN", "LeNet5", "FedAdamSSMCNN", "FedLionCNN", "HARCNN",
    "VGG", "VGG11", "VGG13", "VGG16", "ResNet18", "ResNet20", "CharLSTM", "LSTMLanguageModel",
    "MLP", "LogisticRegression",
]
