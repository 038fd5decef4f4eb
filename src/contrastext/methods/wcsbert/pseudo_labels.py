"""Pseudo-labels for self-training: every pool item's best label and how sure the encoder is of it.

Scores come from the zero-shot label scores (cosine to each label's best prompt). An item is kept when it
passes the similarity threshold (the paper's rule: 0.8 for AG News with all-mpnet-base-v2) and, per label,
ranks within ``top_fraction`` by confidence; ``max_per_label`` and ``max_label_ratio`` then keep a label
that many items match from drowning the others (pseudo-pairs explode and accuracy falls otherwise).

The balance cap is a multiple of the *median* label's kept count by default, not of the rarest's: a cap at
twice the rarest label holds every label to what the rarest one has (on a skewed AG News pool, 45% World and
1.5% Sci/Tech, it kept 287 of 800 texts against 398, and delivered 3.5 points less; docs/methods/wcsbert.md);
against the median, a rare label keeps all it has and a frequent one is still held to a small multiple of a
typical label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field

from contrastext.config import Settings


class SelectionConfig(Settings):
    threshold: float | None = Field(None, ge=-1, le=1, description="keep items whose best-label cosine is at "
                                                                    "least this (None: no threshold)")
    top_fraction: float | None = Field(0.5, gt=0, le=1, description="per label, keep this share of its items, "
                                                                    "most confident first (None: all)")
    confidence: Literal["margin", "similarity"] = Field(
        "margin", description="margin: best minus second-best label score; similarity: the best score")
    max_per_label: int | None = Field(None, ge=1, description="at most this many items per label")
    max_label_ratio: float | None = Field(2.0, ge=1, description="no label keeps more than this times the "
                                                                 "balance_to label's count (None: no balance)")
    balance_to: Literal["median", "smallest"] = Field(
        "median", description="the kept count max_label_ratio multiplies: the median non-empty label's (rare "
                              "labels keep what they have) or the smallest's (every label as thin as the rarest)")
    min_per_label: int = Field(1, ge=0, description="a label keeping fewer items is reported as starved")


@dataclass
class PseudoLabels:
    """Per pool item: best label, its score, the confidence; ``kept`` indexes the items selected."""

    label: np.ndarray  # int16 (int32 beyond 32,768 labels), [N]
    score: np.ndarray  # float, [N] best label's cosine
    confidence: np.ndarray  # float, [N]
    alias: np.ndarray  # int, [N] index (within the label's aliases) of the best-scoring alias
    kept: np.ndarray  # int indices into the pool, sorted

    def kept_per_label(self, n_labels: int) -> np.ndarray:
        return np.bincount(self.label[self.kept], minlength=n_labels)


def confidences(scores: np.ndarray, kind: str) -> np.ndarray:
    if kind == "similarity" or scores.shape[1] < 2:
        return scores.max(axis=1)
    top2 = np.partition(scores, -2, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def label_dtype(n_labels: int) -> type[np.signedinteger]:
    """A label index type of 2 bytes a pool item (4 beyond 32,768 labels), not argmax's 8."""
    return np.int16 if n_labels <= 2**15 else np.int32


def best_labels(scores: np.ndarray, kind: str, chunk_rows: int = 65_536
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``scores``: the best label, its score and the confidence, computed a chunk of rows at a time so
    the temporaries (argmax indices, the partitioned copy) are O(chunk), not O(pool)."""
    n = len(scores)
    label = np.empty(n, dtype=label_dtype(scores.shape[1]))
    best = np.empty(n, dtype=scores.dtype)
    confidence = np.empty(n, dtype=scores.dtype)
    for start in range(0, n, chunk_rows):
        part = scores[start:start + chunk_rows]
        top = part.argmax(axis=1)
        label[start:start + len(part)] = top
        best[start:start + len(part)] = np.take_along_axis(part, top[:, None], axis=1)[:, 0]
        confidence[start:start + len(part)] = confidences(part, kind)
    return label, best, confidence


def select(scores: np.ndarray, config: SelectionConfig, alias: np.ndarray | None = None) -> PseudoLabels:
    """Pseudo-label every row of ``scores`` [N, labels] and choose the rows to train on."""
    n, n_labels = scores.shape
    label, best, confidence = best_labels(scores, config.confidence)
    per_label: list[np.ndarray] = []
    for lab in range(n_labels):
        rows = np.flatnonzero(label == lab)
        if config.threshold is not None:
            rows = rows[best[rows] >= config.threshold]
        rows = rows[np.argsort(-confidence[rows], kind="stable")]
        if config.top_fraction is not None:
            total = int(np.count_nonzero(label == lab))
            rows = rows[: int(np.floor(total * config.top_fraction))]
        if config.max_per_label is not None:
            rows = rows[: config.max_per_label]
        per_label.append(rows.copy())  # a view would keep the label's whole sorted row list alive
    if config.max_label_ratio is not None:
        sizes = [len(rows) for rows in per_label if len(rows)]
        if sizes:
            reference = min(sizes) if config.balance_to == "smallest" else float(np.median(sizes))
            cap = max(1, int(np.floor(reference * config.max_label_ratio)))
            per_label = [rows[:cap] for rows in per_label]
    kept = np.sort(np.concatenate(per_label)) if per_label else np.zeros(0, dtype=np.int64)
    if alias is None:
        alias = np.zeros(n, dtype=np.int64)
    return PseudoLabels(label=label, score=best, confidence=confidence, alias=alias, kept=kept.astype(np.int64))
