"""Scoring an encoded pool against a label set, chunk by chunk from its ``.h5`` shards."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contrastext.data.h5store import H5Corpus
from contrastext.zeroshot import LabelSet, ZeroShotClassifier


@dataclass
class PoolScores:
    ids: np.ndarray  # page ids, [N]
    scores: np.ndarray  # [N, labels]
    alias: np.ndarray  # [N, labels] best alias per label


def score_pool(embeddings_dir: Path, encoder, label_set: LabelSet, template: str,
               chunk_rows: int = 65_536) -> PoolScores:
    """Every pooled page's label scores; the label prompts are embedded once, by ``encoder``."""
    classifier = ZeroShotClassifier(encoder, template=template)
    ids, scores, alias = [], [], []
    for chunk_ids, embeddings in H5Corpus(embeddings_dir).iter_chunks(chunk_rows):
        s, a = classifier.score_embeddings_with_aliases(embeddings, label_set)
        ids.append(chunk_ids)
        scores.append(s)
        alias.append(a)
    if not ids:
        raise ValueError(f"{embeddings_dir} holds no embeddings")
    return PoolScores(np.concatenate(ids).astype(np.int64), np.concatenate(scores), np.concatenate(alias))


def changed_share(previous: np.ndarray | None, current: np.ndarray) -> float | None:
    """Share of pool items whose pseudo-label changed since the previous round (a label-free signal)."""
    if previous is None or len(previous) != len(current):
        return None
    return float(np.mean(previous != current))
