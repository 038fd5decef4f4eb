"""One small class per method, over the same parts the jobs use (BERTopic / SetFit style):

``WCSBert`` (zero-shot classification by self-training), ``ShuffleDivide`` (document clustering),
``SupConClassifier`` (focal + supervised NT-Xent classifier); ``PhraseTopicModel`` (UCTopic's phrase
topics) lives in ``contrastext.methods.uctopic.model``. The names load their module on first use, so importing
this package imports no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contrastext.lazy import lazy_attributes

HOMES = {
    "WCSBert": "contrastext.methods.wcsbert.model",
    "ShuffleDivide": "contrastext.methods.shuffle_divide.model",
    "SupConClassifier": "contrastext.methods.supcon.model",
    "PhraseTopicModel": "contrastext.methods.uctopic.model",
    "PromptTeacher": "contrastext.methods.wcsbert.teachers",
    "PrototypeTeacher": "contrastext.methods.wcsbert.teachers",
    "SphericalKMeans": "contrastext.clustering",
    "ShuffleDividePairs": "contrastext.data.pair_builders",
    "TfidfNeighbourPairs": "contrastext.data.pair_builders",
    "BatchNegatives": "contrastext.methods.shuffle_divide.negatives",
    "OtherClusterNegatives": "contrastext.methods.shuffle_divide.negatives",
}

__all__ = ["BatchNegatives", "OtherClusterNegatives", "PhraseTopicModel", "PromptTeacher", "PrototypeTeacher",
           "ShuffleDivide", "ShuffleDividePairs", "SphericalKMeans", "SupConClassifier", "TfidfNeighbourPairs",
           "WCSBert"]

if TYPE_CHECKING:
    from contrastext.clustering import SphericalKMeans
    from contrastext.data.pair_builders import ShuffleDividePairs, TfidfNeighbourPairs
    from contrastext.methods.shuffle_divide.model import ShuffleDivide
    from contrastext.methods.shuffle_divide.negatives import BatchNegatives, OtherClusterNegatives
    from contrastext.methods.supcon.model import SupConClassifier
    from contrastext.methods.uctopic.model import PhraseTopicModel
    from contrastext.methods.wcsbert.model import WCSBert
    from contrastext.methods.wcsbert.teachers import PromptTeacher, PrototypeTeacher


__getattr__, __dir__ = lazy_attributes(__name__, HOMES, globals(), __all__)
