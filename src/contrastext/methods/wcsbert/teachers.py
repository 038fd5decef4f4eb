"""Teachers: what labels the pool for a self-training round.

A teacher turns the pool's zero-shot prompt scores into the scores the round's pseudo-labels are chosen
from. ``PromptTeacher`` keeps the prompt scores (each item's best label prompt); ``PrototypeTeacher``
scores every item by its cosine to each label's prototype, the mean of that label's most confident items
(optionally refined by spherical k-means on the pool; see ``contrastext.methods.wcsbert.prototypes``).
Embeddings may be an array or a re-iterable of chunks, so a pool streamed from ``.h5`` shards works too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from pydantic import Field

from contrastext.config import Settings
from contrastext.methods.wcsbert.prototypes import Embeddings, label_prototypes, prototype_scores, refine_prototypes


class Teacher(Protocol):
    def scores(self, embeddings: Embeddings, prompt_scores: np.ndarray, label_vectors: np.ndarray) -> np.ndarray:
        """[N, labels] scores of the pool items (rows of ``embeddings``, in order); ``label_vectors`` [labels, D]
        stand for a label that no item takes."""
        ...


@dataclass(frozen=True)
class PromptTeacher:
    """Each item's score for a label is its cosine to the label's best prompt."""

    def scores(self, embeddings: Embeddings, prompt_scores: np.ndarray, label_vectors: np.ndarray) -> np.ndarray:
        return prompt_scores


class PrototypeTeacher(Settings):
    """Each item's score for a label is its cosine to the label's prototype."""

    fraction: float = Field(0.5, gt=0, le=1, description="share of each label's items, most confident first, "
                                                         "whose mean is its prototype")
    iterations: int = Field(0, ge=0, description="spherical k-means refinements of the prototypes on the pool")

    def scores(self, embeddings: Embeddings, prompt_scores: np.ndarray, label_vectors: np.ndarray) -> np.ndarray:
        seeds = label_prototypes(embeddings, prompt_scores, self.fraction, fallback=label_vectors)
        return prototype_scores(embeddings, refine_prototypes(embeddings, seeds, self.iterations))
