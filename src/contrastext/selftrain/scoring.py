"""Scoring an encoded pool against a label set, chunk by chunk from its ``.h5`` shards."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from contrastext.data.h5store import H5Corpus
from contrastext.zeroshot import LabelSet, ZeroShotClassifier, label_scores_and_aliases


@dataclass
class PoolScores:
    ids: np.ndarray  # page ids, [N]
    scores: np.ndarray  # [N, labels]
    alias: np.ndarray  # [N, labels] best alias per label


def score_pool(embeddings_dir: Path, encoder, label_set: LabelSet, template: str,
               chunk_rows: int = 65_536) -> PoolScores:
    """Every pooled page's label scores; the label prompts are embedded once, by ``encoder``."""
    alias_embeddings = embed_label_strings(encoder, label_set, template)
    _, owner = label_set.flat()
    try:
        return scan_pool(H5Corpus(embeddings_dir).iter_chunks(chunk_rows), alias_embeddings, owner,
                         len(label_set.labels))
    except ValueError as error:
        raise ValueError(f"{embeddings_dir} holds no embeddings") from error


def embed_label_strings(encoder, label_set: LabelSet, template: str) -> np.ndarray:
    """``encoder``'s embeddings of every label string (names or aliases, in ``template``), in ``label_set.flat()`` order."""
    return ZeroShotClassifier(encoder, template=template).alias_embeddings(label_set)


def scan_pool(chunks: Iterable[tuple[np.ndarray, np.ndarray]], alias_embeddings: np.ndarray,
              owner: np.ndarray, n_labels: int) -> PoolScores:
    """Label scores of ``(ids, embeddings)`` chunks against the aliases' embeddings (``owner``: each one's label)."""
    ids, scores, alias = [], [], []
    for chunk_ids, embeddings in chunks:
        s, a = label_scores_and_aliases(embeddings, alias_embeddings, owner, n_labels)
        ids.append(chunk_ids)
        scores.append(s)
        alias.append(a)
    if not ids:
        raise ValueError("no embeddings to score")
    return PoolScores(np.concatenate(ids).astype(np.int64), np.concatenate(scores), np.concatenate(alias))


def changed_share(previous: np.ndarray | None, current: np.ndarray) -> float | None:
    """Share of pool items whose pseudo-label changed since the previous round (a label-free signal)."""
    if previous is None or len(previous) != len(current):
        return None
    return float(np.mean(previous != current))
