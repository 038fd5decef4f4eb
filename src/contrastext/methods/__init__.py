"""One small class per method, over the same parts the jobs use (BERTopic / SetFit style):

``WCSBert`` (zero-shot classification by self-training), ``ShuffleDivide`` (document clustering),
``SupConClassifier`` (focal + supervised NT-Xent classifier); ``PhraseTopicModel`` (UCTopic's phrase
topics) lives in ``contrastext.uctopic.service``. The names load their module on first use, so importing
this package imports no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contrastext.lazy import lazy_attributes

HOMES = {
    "WCSBert": "contrastext.methods.wcsbert",
    "ShuffleDivide": "contrastext.methods.shuffle_divide",
    "SupConClassifier": "contrastext.methods.supcon",
    "PhraseTopicModel": "contrastext.uctopic.service",
    "PromptTeacher": "contrastext.selftrain.teachers",
    "PrototypeTeacher": "contrastext.selftrain.teachers",
    "SphericalKMeans": "contrastext.clustering",
    "ShuffleDividePairs": "contrastext.data.pair_builders",
    "TfidfNeighbourPairs": "contrastext.data.pair_builders",
    "BatchNegatives": "contrastext.methods.negatives",
    "OtherClusterNegatives": "contrastext.methods.negatives",
}

__all__ = ["BatchNegatives", "OtherClusterNegatives", "PhraseTopicModel", "PromptTeacher", "PrototypeTeacher",
           "ShuffleDivide", "ShuffleDividePairs", "SphericalKMeans", "SupConClassifier", "TfidfNeighbourPairs",
           "WCSBert"]

if TYPE_CHECKING:
    from contrastext.clustering import SphericalKMeans
    from contrastext.data.pair_builders import ShuffleDividePairs, TfidfNeighbourPairs
    from contrastext.methods.negatives import BatchNegatives, OtherClusterNegatives
    from contrastext.methods.shuffle_divide import ShuffleDivide
    from contrastext.methods.supcon import SupConClassifier
    from contrastext.methods.wcsbert import WCSBert
    from contrastext.selftrain.teachers import PromptTeacher, PrototypeTeacher
    from contrastext.uctopic.service import PhraseTopicModel


__getattr__, __dir__ = lazy_attributes(__name__, HOMES, globals(), __all__)
