"""Shuffle & Divide: document clustering by contrastive training on a document's own sentence groups.

``model`` is the ``ShuffleDivide`` class (the ``shuffle_divide`` job is ``contrastext.pipelines.shuffle_divide``);
``negatives`` says which in-batch documents are negatives. Its epochs run in ``contrastext.methods.epochs``,
which UCTopic's cluster-assisted fine-tuning shares; its pair builders are in ``contrastext.data.pair_builders``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contrastext.lazy import lazy_attributes

__all__ = ["ShuffleDivide"]

if TYPE_CHECKING:
    from contrastext.methods.shuffle_divide.model import ShuffleDivide

__getattr__, __dir__ = lazy_attributes(__name__, {"ShuffleDivide": "contrastext.methods.shuffle_divide.model"},
                                       globals(), __all__,
                                       fallback="contrastext.methods.shuffle_divide.model")
