"""contrastext: contrastive text encoders at corpus scale, on Ray."""

__version__ = "0.1.0"
