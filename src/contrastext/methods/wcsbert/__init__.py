"""WC-SBERT: zero-shot classification by self-training on the user's own unlabelled texts.

``model`` is the ``WCSBert`` class and ``config`` the settings it shares with the ``wcsbert_selftrain`` job
(``contrastext.pipelines.wcsbert``); ``rounds`` is the round loop both run. The parts, each pluggable:
``teachers`` (prompt or prototype pseudo-labels), ``calibration``, ``pseudo_labels`` (selection),
``pseudo_pairs`` and ``text_positives`` (what a round trains on), ``scoring``, ``prototypes``, ``heads``
(what a model classifies with), ``guard`` and ``stopping`` (which round and head to deliver). The job's
parts: ``job_run`` (what a run's stages share), ``category_pretraining``, ``pool``, ``category_votes`` and
``round_pairs`` (pairs on storage), ``stored_rounds`` (the rounds over the pool's ``.h5`` shards),
``evaluation`` and ``report``; ``contrastext.pipelines.wcsbert`` builds the corpus, writes and encodes the
pool, puts the stages in order and delivers the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contrastext.lazy import lazy_attributes

__all__ = ["WCSBert"]

if TYPE_CHECKING:
    from contrastext.methods.wcsbert.model import WCSBert

__getattr__, __dir__ = lazy_attributes(__name__, {"WCSBert": "contrastext.methods.wcsbert.model"}, globals(), __all__,
                                       fallback="contrastext.methods.wcsbert.model")
