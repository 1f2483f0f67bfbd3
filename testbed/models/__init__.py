"""Model zoo: name -> factory(sample_shape, num_classes, width) -> nn.Module."""
from testbed.models.cnn import CNN512, FedLPSCNN

MODELS = {"cnn_fedlps": FedLPSCNN, "cnn_512": CNN512}

__all__ = ["MODELS", "CNN512", "FedLPSCNN"]
