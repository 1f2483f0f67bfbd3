"""Edge-device emulation testbed for federated learning."""
__version__ = "0.1.0"
