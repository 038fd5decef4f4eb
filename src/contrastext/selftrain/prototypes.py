"""Label prototypes from the pool: each label's mean direction over its most confidently labelled items.

The label prompts are one point per label; the pool's confident items give each label a centroid in the
encoder's own space, which classifies by nearest prototype. ``refine_prototypes`` then runs spherical
k-means on the pool seeded by those centroids, so each label settles on the pool's own cluster near it.
No gold label is read: the items are chosen by the prompts' pseudo-labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from contrastext.data.h5store import H5Corpus
from contrastext.selftrain.pseudo_labels import SelectionConfig, select


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def label_prototypes(embeddings: np.ndarray, scores: np.ndarray, fraction: float = 0.5,
                     fallback: np.ndarray | None = None) -> np.ndarray:
    """[labels, D] unit prototypes: the mean unit embedding of each label's top ``fraction`` by margin.

    A label no pool item carries takes its row of ``fallback`` (e.g. its prompt embedding) when given.
    """
    pseudo = select(scores, SelectionConfig(top_fraction=fraction, max_label_ratio=None))
    units = _unit(np.asarray(embeddings, dtype=np.float32))
    prototypes = np.zeros((scores.shape[1], units.shape[1]), dtype=np.float32)
    for label in range(scores.shape[1]):
        members = pseudo.kept[pseudo.label[pseudo.kept] == label]
        if len(members) == 0 and fallback is not None:
            prototypes[label] = fallback[label]
            continue
        if len(members) == 0:
            raise ValueError(f"no pool item is labelled {label}: cannot build its prototype")
        prototypes[label] = units[members].mean(axis=0)
    return _unit(prototypes)


def pool_embeddings(embeddings_dir: Path, ids: Sequence[int]) -> np.ndarray:
    """The pool's stored embeddings in the order of ``ids`` (as ``score_pool`` returned them)."""
    chunks = [e for _, e in H5Corpus(embeddings_dir).iter_chunks()]
    stored = np.concatenate(chunks) if chunks else np.zeros((0, 0), np.float32)
    if len(stored) != len(ids):
        raise ValueError(f"{embeddings_dir} has {len(stored)} rows, expected {len(ids)}")
    return stored


def classify_by_prototypes(text_embeddings: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    return prototype_scores(text_embeddings, prototypes).argmax(axis=1)


def refine_prototypes(embeddings: np.ndarray, prototypes: np.ndarray, iterations: int) -> np.ndarray:
    """Spherical k-means over the pool seeded by ``prototypes``; a label whose cluster empties keeps its seed."""
    units = _unit(np.asarray(embeddings, dtype=np.float32))
    current = _unit(np.asarray(prototypes, dtype=np.float32))
    for _ in range(iterations):
        nearest = (units @ current.T).argmax(axis=1)
        updated = current.copy()
        for label in range(len(current)):
            members = units[nearest == label]
            if len(members):
                updated[label] = members.mean(axis=0)
        updated = _unit(updated)
        if np.allclose(updated, current, atol=1e-6):
            return updated
        current = updated
    return current


def prototype_scores(embeddings: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    """[N, labels] cosine of each item to each label's prototype."""
    return _unit(np.asarray(embeddings, dtype=np.float32)) @ prototypes.T
