"""Focal + supervised NT-Xent classification.

``model`` is the ``SupConClassifier`` class (the ``supcon_classify`` job is
``contrastext.pipelines.supcon_classify``); ``settings`` holds the loss choice and training settings both use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contrastext.lazy import lazy_attributes

__all__ = ["SupConClassifier"]

if TYPE_CHECKING:
    from contrastext.methods.supcon.model import SupConClassifier

__getattr__, __dir__ = lazy_attributes(__name__, {"SupConClassifier": "contrastext.methods.supcon.model"},
                                       globals(), __all__,
                                       fallback="contrastext.methods.supcon.model")
