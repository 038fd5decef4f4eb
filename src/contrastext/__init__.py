"""contrastext: contrastive text encoders at corpus scale, on Ray.

The methods as classes (``contrastext.WCSBert``, ``ShuffleDivide``, ``SupConClassifier``,
``PhraseTopicModel``, with their pluggable parts) load on first use: ``import contrastext`` imports no torch.
"""

from __future__ import annotations

from contrastext import moved
from contrastext.lazy import lazy_attributes

__version__ = "0.1.0"

__all__ = ["BatchNegatives", "OtherClusterNegatives", "PhraseTopicModel", "PromptTeacher", "PrototypeTeacher",
           "ShuffleDivide", "ShuffleDividePairs", "SphericalKMeans", "SupConClassifier", "TfidfNeighbourPairs",
           "WCSBert"]

# looked up in contrastext.methods on first use: every module imports from this package, so it imports none
__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(__all__, "contrastext.methods"), globals(), __all__)
moved.install()  # an old module path fails with an error that names its new home
