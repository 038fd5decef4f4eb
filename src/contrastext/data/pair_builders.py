"""Where an unsupervised document encoder's positive pairs come from: one object per rule.

A pair builder is prepared once on the training texts (``prepare`` returns what it found, for the report),
then gives each epoch's pairs, ``{anchor, positive, id}`` (and ``group`` when groups are given, for
``contrastext.methods.shuffle_divide.negatives``). ``ShuffleDivide`` takes any object with these two methods; the
``shuffle_divide`` job picks one of the two below by its ``pair_method``.

    ShuffleDividePairs("sentence")   # the paper's: a document's shuffled units cut in half, fresh every epoch
    TfidfNeighbourPairs()            # each document and its nearest other document by TF-IDF cosine
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from contrastext.data.documents import (
    ShuffleUnit,
    TfidfNeighbours,
    shuffle_divide_pairs,
    split_units,
    tfidf_neighbours,
    tfidf_pairs,
)


@runtime_checkable
class PairBuilder(Protocol):
    def prepare(self, texts: Sequence[str], *, labels: Sequence[str] | None = None) -> dict[str, Any]:
        """Read the training texts once; ``labels`` only measure the pairs (never shape them)."""

    def pairs(self, epoch: int, *, ids: Sequence[str] | None = None,
              groups: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """Epoch ``epoch``'s pairs (1-based), over the prepared texts."""


class ShuffleDividePairs:
    """Shuffle & Divide: each document's units (sentences or words) shuffled and cut in half; the halves are
    a positive pair. Every epoch shuffles afresh (seeded by ``seed`` + epoch and the document's index);
    documents with fewer than ``min_units`` units are left out."""

    method = "shuffle_divide"

    def __init__(self, unit: ShuffleUnit = "sentence", *, min_units: int = 4, seed: int = 0):
        if min_units < 2:
            raise ValueError("min_units must be at least 2 so both halves are non-empty")
        self.unit: ShuffleUnit = unit
        self.min_units = min_units
        self.seed = seed
        self._units: list[list[str]] | None = None

    def prepare(self, texts: Sequence[str], *, labels: Sequence[str] | None = None) -> dict[str, Any]:
        self._units = split_units(texts, self.unit)
        counts = np.array([len(units) for units in self._units])
        usable = int((counts >= self.min_units).sum())
        if not usable:
            raise ValueError(f"no training pairs: no document has {self.min_units} {self.unit}s to shuffle and "
                             "divide; lower min_units, shuffle words, or use TF-IDF neighbour pairs")
        return {"method": self.method, "unit": self.unit, "pairs": usable,
                "documents_too_short": int((counts < self.min_units).sum()), "median_units": float(np.median(counts))}

    def pairs(self, epoch: int, *, ids: Sequence[str] | None = None,
              groups: Sequence[int] | None = None) -> list[dict[str, Any]]:
        if self._units is None:
            raise RuntimeError("call prepare(texts) first")
        return shuffle_divide_pairs(self._units, epoch=epoch, seed=self.seed, min_units=self.min_units, ids=ids,
                                    groups=groups)


class TfidfNeighbourPairs:
    """Each document paired with its most similar other document by TF-IDF cosine (computed ``chunk_rows``
    rows at a time, never the n × n matrix). The pairs are the same every epoch."""

    method = "tfidf"

    def __init__(self, *, chunk_rows: int = 1024, max_features: int | None = 100_000, min_df: int = 2):
        self.chunk_rows = chunk_rows
        self.max_features = max_features
        self.min_df = min_df
        self._texts: Sequence[str] | None = None
        self.neighbours_: TfidfNeighbours | None = None

    def prepare(self, texts: Sequence[str], *, labels: Sequence[str] | None = None) -> dict[str, Any]:
        self.neighbours_ = tfidf_neighbours(texts, labels=labels, chunk_rows=self.chunk_rows,
                                            max_features=self.max_features, min_df=self.min_df)
        self._texts = texts
        return {"method": self.method, "pairs": len(texts), "label_agreement": self.neighbours_.label_agreement,
                "mean_similarity": float(self.neighbours_.similarity.mean())}

    def pairs(self, epoch: int, *, ids: Sequence[str] | None = None,
              groups: Sequence[int] | None = None) -> list[dict[str, Any]]:
        if self.neighbours_ is None or self._texts is None:
            raise RuntimeError("call prepare(texts) first")
        return tfidf_pairs(self._texts, self.neighbours_, ids=ids, groups=groups)
