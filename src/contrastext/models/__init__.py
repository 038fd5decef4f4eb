"""Encoders and offline model resolution."""

from contrastext.models.encoder import TextEncoder, cpu_has_native_bf16, pick_device, pool
from contrastext.models.resolve import DEFAULT_MODEL, ModelNotFoundError, resolve_model_path
from contrastext.models.st_format import UnsupportedModelLayoutError

__all__ = [
    "DEFAULT_MODEL",
    "ModelNotFoundError",
    "TextEncoder",
    "cpu_has_native_bf16",
    "UnsupportedModelLayoutError",
    "pick_device",
    "pool",
    "resolve_model_path",
]
