"""UCTopic: contrastive phrase representations (span pooling), cluster-assisted fine-tuning and topic mining.

``model`` is the ``PhraseTopicModel`` class and ``config`` the ``uctopic`` job's settings (the job is
``contrastext.pipelines.uctopic``). The parts: ``phrases``, ``candidates``, ``text_mentions`` and ``sources``
(mentions and their pairs), ``encoder`` (``PhraseEncoder``), ``objective``, ``loss`` and ``mlm`` (training),
``ccl`` (cluster-assisted epochs), ``topics`` and ``metrics``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contrastext.lazy import lazy_attributes

__all__ = ["PhraseInstance", "PhraseTopicModel"]

if TYPE_CHECKING:
    from contrastext.methods.uctopic.model import PhraseTopicModel
    from contrastext.methods.uctopic.phrases import PhraseInstance

__getattr__, __dir__ = lazy_attributes(__name__, {"PhraseTopicModel": "contrastext.methods.uctopic.model",
                                                  "PhraseInstance": "contrastext.methods.uctopic.phrases"},
                                       globals(), __all__)
