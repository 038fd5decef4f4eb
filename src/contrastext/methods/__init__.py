"""One small class per method, over the same parts the jobs use (BERTopic / SetFit style):

``WCSBert`` (zero-shot classification by self-training), ``ShuffleDivide`` (document clustering),
``SupConClassifier`` (focal + supervised NT-Xent classifier); ``PhraseTopicModel`` (UCTopic's phrase
topics) lives in ``contrastext.uctopic.service``. The names load their module on first use, so importing
this package imports no torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

HOMES = {
    "WCSBert": "contrastext.methods.wcsbert",
    "ShuffleDivide": "contrastext.methods.shuffle_divide",
    "SupConClassifier": "contrastext.methods.supcon",
    "PhraseTopicModel": "contrastext.uctopic.service",
    "PromptTeacher": "contrastext.selftrain.teachers",
    "PrototypeTeacher": "contrastext.selftrain.teachers",
    "SphericalKMeans": "contrastext.clustering",
}

__all__ = ["PhraseTopicModel", "PromptTeacher", "PrototypeTeacher", "ShuffleDivide", "SphericalKMeans",
           "SupConClassifier", "WCSBert"]

if TYPE_CHECKING:
    from contrastext.clustering import SphericalKMeans
    from contrastext.methods.shuffle_divide import ShuffleDivide
    from contrastext.methods.supcon import SupConClassifier
    from contrastext.methods.wcsbert import WCSBert
    from contrastext.selftrain.teachers import PromptTeacher, PrototypeTeacher
    from contrastext.uctopic.service import PhraseTopicModel


def __getattr__(name: str) -> Any:
    home = HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
