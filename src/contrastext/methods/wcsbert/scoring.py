"""Scoring an encoded pool against a label set, chunk by chunk from its ``.h5`` shards."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from contrastext.data.h5store import H5Corpus
from contrastext.zeroshot import LabelSet, Templates, ZeroShotClassifier, label_scores_and_aliases


@dataclass
class PoolScores:
    ids: np.ndarray  # page ids, [N]
    scores: np.ndarray  # [N, labels] float32
    alias: np.ndarray  # [N, labels] best alias per label, in the smallest integer type that holds it


def score_pool(embeddings_dir: Path, encoder, label_set: LabelSet, template: Templates,
               chunk_rows: int = 65_536) -> PoolScores:
    """Every pooled page's label scores; the label prompts are embedded once, by ``encoder`` (several
    templates: each label string is their ensemble, see ``embed_label_strings``)."""
    alias_embeddings = embed_label_strings(encoder, label_set, template)
    _, owner = label_set.flat()
    corpus = H5Corpus(embeddings_dir)
    if len(corpus) == 0:
        raise ValueError(f"{embeddings_dir} holds no embeddings")
    return scan_pool(corpus.iter_chunks(chunk_rows), alias_embeddings, owner, len(label_set.labels),
                     rows=len(corpus))


def embed_label_strings(encoder, label_set: LabelSet, template: Templates) -> np.ndarray:
    """``encoder``'s embeddings of every label string (names or aliases, in ``template``), in ``label_set.flat()``
    order; with several templates, each string's renormalised mean of its unit prompt embeddings."""
    return ZeroShotClassifier(encoder, template=template).alias_embeddings(label_set)


def label_prompt_vectors(encoder, label_set: LabelSet, template: Templates) -> np.ndarray:
    """[labels, D]: each label's mean alias-prompt embedding (the prototype of a label no pool item takes)."""
    aliases = embed_label_strings(encoder, label_set, template)
    _, owner = label_set.flat()
    return np.stack([aliases[owner == label].mean(axis=0) for label in range(len(label_set.labels))])


def scan_pool(chunks: Iterable[tuple[np.ndarray, np.ndarray]], alias_embeddings: np.ndarray,
              owner: np.ndarray, n_labels: int, rows: int | None = None) -> PoolScores:
    """Label scores of ``(ids, embeddings)`` chunks against the aliases' embeddings (``owner``: each one's label).

    With ``rows`` (the pool's size) the result is filled in place, chunk by chunk: the driver then holds the
    result and one chunk, never the list of chunk results and their concatenation (twice the result).
    """
    alias_type = np.min_scalar_type(max(int(np.bincount(owner, minlength=n_labels).max()) - 1, 0))
    if rows is None:
        parts = [_chunk_scores(i, e, alias_embeddings, owner, n_labels, alias_type) for i, e in chunks]
        if not parts:
            raise ValueError("no embeddings to score")
        return PoolScores(*(np.concatenate(column) for column in zip(*parts)))
    out = PoolScores(np.empty(rows, np.int64), np.empty((rows, n_labels), np.float32),
                     np.empty((rows, n_labels), alias_type))
    filled = 0
    for chunk_ids, embeddings in chunks:
        part = _chunk_scores(chunk_ids, embeddings, alias_embeddings, owner, n_labels, alias_type)
        end = filled + len(part[0])
        if end > rows:
            raise ValueError(f"the pool has more than the {rows} rows announced")
        out.ids[filled:end], out.scores[filled:end], out.alias[filled:end] = part
        filled = end
    if filled == 0:
        raise ValueError("no embeddings to score")
    if filled != rows:
        raise ValueError(f"the pool has {filled} rows, {rows} were announced")
    return out


def _chunk_scores(ids: np.ndarray, embeddings: np.ndarray, alias_embeddings: np.ndarray, owner: np.ndarray,
                  n_labels: int, alias_type: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scores, alias = label_scores_and_aliases(embeddings, alias_embeddings, owner, n_labels)
    return np.asarray(ids, np.int64), scores.astype(np.float32, copy=False), alias.astype(alias_type)


def changed_share(previous: np.ndarray | None, current: np.ndarray) -> float | None:
    """Share of pool items whose pseudo-label changed since the previous round (a label-free signal)."""
    if previous is None or len(previous) != len(current):
        return None
    return float(np.mean(previous != current))
