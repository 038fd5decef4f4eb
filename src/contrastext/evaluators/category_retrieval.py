"""Information-retrieval evaluation of category pretraining: from a page's opening words, find its categories.

Each query is a held-out page's first words; the corpus is every category string; a query's relevant
documents are its page's categories. MAP@k follows sentence-transformers' InformationRetrievalEvaluator:
precision at each relevant hit within the top k, summed and divided by min(k, relevant count).

The corpus can be every category of Wikipedia (about 1.5M strings), so it is never embedded or scored
whole, and it may be given as the location of a parquet file with a ``category`` column (the corpus job's
``category_counts.parquet``), read ``chunk_size`` rows at a time, so that neither the driver nor the
evaluator's pickled copy on the training workers holds the list: categories are encoded ``chunk_size`` at a time and each chunk is scored against ``query_batch``
queries at a time, keeping a running top k per query. Memory is O(queries × (k + D) + chunk_size × D +
query_batch × chunk_size) whatever the number of categories, and the ranking is the exact one: by cosine,
ties to the category listed first (as a stable sort of the full score matrix gives).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import numpy as np

from contrastext.vectors import unit_rows


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
    # the corpus: every category string (the relevant ones are added when missing), or a parquet file's
    # location (path or URI) whose ``category`` column lists them once each
    categories: Sequence[str] | str | os.PathLike
    k: int = 3
    batch_size: int = 128
    # categories encoded and scored at a time; a multiple of batch_size × 64 keeps the encoder's
    # length-sorting windows the same as one call over every category would (the relevant categories
    # missing from the corpus are encoded after it, in chunks of their own)
    chunk_size: int = 16_384
    query_batch: int = 1_024  # queries scored against a chunk at a time

    def __post_init__(self) -> None:
        if isinstance(self.categories, os.PathLike):
            self.categories = os.fspath(self.categories)
        if not isinstance(self.categories, str):
            self.categories = list(dict.fromkeys(self.categories))
        if self.k < 1 or self.chunk_size < 1 or self.query_batch < 1:
            raise ValueError(f"k ({self.k}), chunk_size ({self.chunk_size}) and query_batch ({self.query_batch}) "
                             "must be ≥ 1")

    def __call__(self, encoder) -> dict[str, float]:
        if not self.queries:
            return {}
        relevant_names = {c for cs in self.query_categories for c in cs}
        index: dict[str, int] = {}  # filled as the chunks are read: each relevant category's row
        q = unit_rows(encoder.encode(list(self.queries), batch_size=self.batch_size))
        chunks = (unit_rows(encoder.encode(names, batch_size=self.batch_size))
                  for names in self._category_chunks(relevant_names, index))
        top = top_k(q, chunks, self.k, query_batch=self.query_batch)
        ap, recall = [], []
        for row, cats in zip(top, self.query_categories):
            relevant = {index[x] for x in cats}
            ap.append(average_precision_at_k(list(row), relevant, self.k))
            recall.append(len(relevant & set(row.tolist())) / len(relevant))
        return {f"map@{self.k}": float(np.mean(ap)), f"recall@{self.k}": float(np.mean(recall))}


    def _category_chunks(self, relevant: set[str], index: dict[str, int]) -> Iterator[list[str]]:
        """The categories ``chunk_size`` at a time, then the relevant ones not met; records relevant rows in ``index``."""
        row = 0
        for names in self._stored_chunks():
            for offset, name in enumerate(names):
                if name in relevant:
                    index.setdefault(name, row + offset)
            row += len(names)
            yield names
        missing = [name for name in dict.fromkeys(c for cs in self.query_categories for c in cs) if name not in index]
        for start in range(0, len(missing), self.chunk_size):
            names = missing[start:start + self.chunk_size]
            index.update((name, row + offset) for offset, name in enumerate(names))
            row += len(names)
            yield names

    def _stored_chunks(self) -> Iterator[list[str]]:
        if isinstance(self.categories, str):
            from contrastext import storage

            for batch in storage.parquet_file(self.categories).iter_batches(batch_size=self.chunk_size,
                                                                            columns=["category"]):
                yield batch.column(0).to_pylist()
        else:
            for start in range(0, len(self.categories), self.chunk_size):
                yield list(self.categories[start:start + self.chunk_size])


def top_k(queries: np.ndarray, corpus_chunks: Iterable[np.ndarray], k: int, query_batch: int = 1_024) -> np.ndarray:
    """[queries, min(k, corpus rows)] corpus row numbers of each query's k highest inner products, best first.

    ``corpus_chunks`` are consecutive [rows, D] blocks of the corpus (read once, one at a time); the order is
    that of ``np.argsort(-queries @ corpus.T, kind="stable")[:, :k]`` without the full matrix: a tie goes
    to the lower row number.
    """
    queries = np.asarray(queries, dtype=np.float32)
    n = len(queries)
    best_scores = np.full((n, k), -np.inf, dtype=np.float32)
    best_rows = np.full((n, k), np.iinfo(np.int64).max, dtype=np.int64)
    offset = 0
    for chunk in corpus_chunks:
        chunk = np.asarray(chunk, dtype=np.float32)
        for start in range(0, n, query_batch):
            rows = slice(start, start + query_batch)
            scores, found = _block_top_k(_score_block(queries[rows], chunk), k)
            best_scores[rows], best_rows[rows] = _merge(best_scores[rows], best_rows[rows], scores, found + offset, k)
        offset += len(chunk)
    return best_rows[:, :min(k, offset)]


def _score_block(queries: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    """[queries, chunk rows] inner products: the largest matrix the retrieval ever holds."""
    return queries @ chunk.T


def _block_top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's min(k, columns) best (score, column), ties to the lower column, in any order."""
    if scores.shape[1] <= k:
        columns = np.broadcast_to(np.arange(scores.shape[1]), scores.shape).copy()
    else:
        columns = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        kth = np.take_along_axis(scores, columns, axis=1).min(axis=1)
        # argpartition picks among values equal to the k-th at random: redo those rows with a stable sort
        for row in np.flatnonzero((scores >= kth[:, None]).sum(axis=1) > k):
            columns[row] = np.argsort(-scores[row], kind="stable")[:k]
    return np.take_along_axis(scores, columns, axis=1), columns


def _merge(scores_a: np.ndarray, rows_a: np.ndarray, scores_b: np.ndarray, rows_b: np.ndarray,
           k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best of two candidate sets per query, ordered by score (descending), then row number."""
    scores = np.concatenate([scores_a, scores_b], axis=1)
    rows = np.concatenate([rows_a, rows_b], axis=1)
    order = np.lexsort((rows, -scores), axis=1)[:, :k]
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(rows, order, axis=1)
