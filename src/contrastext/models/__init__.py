"""Encoders and offline model resolution.

The names below load their module on first use, so importing ``contrastext.models.resolve`` (for
``DEFAULT_MODEL``, as the typed configs do) does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contrastext.lazy import lazy_attributes

_HOMES = {
    "DEFAULT_MODEL": "contrastext.models.resolve",
    "ModelNotFoundError": "contrastext.models.resolve",
    "resolve_model_path": "contrastext.models.resolve",
    "TextEncoder": "contrastext.models.encoder",
    "cpu_has_native_bf16": "contrastext.models.encoder",
    "pick_device": "contrastext.models.encoder",
    "pool": "contrastext.models.encoder",
    "UnsupportedModelLayoutError": "contrastext.models.st_format",
}

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

if TYPE_CHECKING:
    from contrastext.models.encoder import TextEncoder, cpu_has_native_bf16, pick_device, pool
    from contrastext.models.resolve import DEFAULT_MODEL, ModelNotFoundError, resolve_model_path
    from contrastext.models.st_format import UnsupportedModelLayoutError


__getattr__, __dir__ = lazy_attributes(__name__, _HOMES, globals(), __all__)
