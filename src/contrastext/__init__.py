"""contrastext: contrastive text encoders at corpus scale, on Ray.

The methods as classes (``contrastext.WCSBert``, ``ShuffleDivide``, ``SupConClassifier``,
``PhraseTopicModel``, with their pluggable parts) load on first use: ``import contrastext`` imports no torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = ["PhraseTopicModel", "PromptTeacher", "PrototypeTeacher", "ShuffleDivide", "SphericalKMeans",
           "SupConClassifier", "WCSBert"]


def __getattr__(name: str) -> Any:
    # looked up by name on first use: every module imports from this package, so it imports none of them
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("contrastext.methods"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
