"""Information-retrieval evaluation of category pretraining: from a page's opening words, find its categories.

Each query is a held-out page's first words; the corpus is every category string; a query's relevant
documents are its page's categories. MAP@k follows sentence-transformers' InformationRetrievalEvaluator:
precision at each relevant hit within the top k, summed and divided by min(k, relevant count).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


def first_words(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


def average_precision_at_k(ranked: Sequence[int], relevant: set[int], k: int) -> float:
    hits, total = 0, 0.0
    for rank, doc in enumerate(ranked[:k], start=1):
        if doc in relevant:
            hits += 1
            total += hits / rank
    return total / min(k, len(relevant)) if relevant else 0.0


@dataclass
class CategoryRetrievalEvaluator:
    """MAP@k and recall@k of page → category retrieval by cosine similarity."""

    queries: Sequence[str]
    query_categories: Sequence[Sequence[str]]
    categories: Sequence[str]  # the corpus: every category string (the relevant ones included)
    k: int = 3
    batch_size: int = 128

    def __post_init__(self) -> None:
        self.categories = list(dict.fromkeys([*self.categories, *(c for cs in self.query_categories for c in cs)]))

    def __call__(self, encoder) -> dict[str, float]:
        if not self.queries:
            return {}
        index = {c: i for i, c in enumerate(self.categories)}
        q = _unit(encoder.encode(list(self.queries), batch_size=self.batch_size))
        c = _unit(encoder.encode(self.categories, batch_size=self.batch_size))
        scores = q @ c.T
        top = np.argsort(-scores, axis=1, kind="stable")[:, : self.k]
        ap, recall = [], []
        for row, cats in zip(top, self.query_categories):
            relevant = {index[x] for x in cats}
            ap.append(average_precision_at_k(list(row), relevant, self.k))
            recall.append(len(relevant & set(row.tolist())) / len(relevant))
        return {f"map@{self.k}": float(np.mean(ap)), f"recall@{self.k}": float(np.mean(recall))}


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)
