"""Focal + supervised NT-Xent classification.

``model`` is the ``SupConClassifier`` class (the ``supcon_classify`` job is
``contrastext.pipelines.supcon_classify``); ``settings`` holds the settings both use (``SupConSettings``: the
loss, the head's options, epochs and rates) and the train block; ``config`` is the job's config.
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
