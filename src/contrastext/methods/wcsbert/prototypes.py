"""Label prototypes from the pool: each label's mean direction over its most confidently labelled items.

The label prompts are one point per label; the pool's confident items give each label a centroid in the
encoder's own space, which classifies by nearest prototype. ``refine_prototypes`` then runs spherical
k-means on the pool seeded by those centroids, so each label settles on the pool's own cluster near it:
faiss finds each row's nearest prototype, chunk by chunk; the update (per-label sums) is ours, because
``faiss.Kmeans`` trains on one in-memory array and cannot stream the pool.
No gold label is read: the items are chosen by the prompts' pseudo-labels.

The pool can be millions of rows (6.4M × 384 float32 is about 9.8 GB), so it is never held whole: every
function takes the embeddings as an array *or* as chunks — an iterable of [rows, D] arrays (or of
``(ids, embeddings)`` pairs, as ``H5Corpus.iter_chunks`` yields them) — and reads them chunk by chunk,
keeping only per-label sums: memory O(labels × D + one chunk) besides the [N, labels] scores.
``pool_embeddings`` gives a stored pool in that form, read again from its ``.h5`` shards on every pass;
``refine_prototypes`` makes one pass per k-means iteration, so it needs an array or a re-iterable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator, Sequence, Union

import numpy as np

from contrastext.data.h5store import H5Corpus
from contrastext.methods.wcsbert.pseudo_labels import SelectionConfig, select
from contrastext.vectors import unit_rows

Embeddings = Union[np.ndarray, Iterable[np.ndarray], Iterable[tuple[np.ndarray, np.ndarray]]]


def _unit_chunks(embeddings: Embeddings) -> Iterator[np.ndarray]:
    """One pass over ``embeddings``: unit float32 rows, one chunk at a time (an array is one chunk)."""
    for chunk in (embeddings,) if isinstance(embeddings, np.ndarray) else embeddings:
        if isinstance(chunk, tuple):  # (ids, embeddings)
            chunk = chunk[1]
        yield unit_rows(np.asarray(chunk, dtype=np.float32))


def _label_means(embeddings: Embeddings, assign, n_labels: int,
                 expected_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One pass: per label, the mean unit embedding of the rows ``assign(offset, units)`` gives it (-1: none).

    Returns ([labels, D] float64 means, [labels] member counts); a label with no member has a zero mean.
    """
    sums: np.ndarray | None = None
    counts = np.zeros(n_labels, dtype=np.int64)
    offset = 0
    for units in _unit_chunks(embeddings):
        if sums is None:
            sums = np.zeros((n_labels, units.shape[1]), dtype=np.float64)
        if expected_rows is not None and offset + len(units) > expected_rows:
            raise ValueError(f"the embeddings have more rows than the scores ({expected_rows})")
        labels = assign(offset, units)
        for label in np.unique(labels[labels >= 0]):
            members = labels == label
            sums[label] += units[members].sum(axis=0, dtype=np.float64)
            counts[label] += int(members.sum())
        offset += len(units)
    if expected_rows is not None and offset != expected_rows:
        raise ValueError(f"the embeddings have {offset} rows, the scores {expected_rows}")
    if sums is None:
        return np.zeros((n_labels, 0)), counts
    return sums / np.maximum(counts, 1)[:, None], counts


def label_prototypes(embeddings: Embeddings, scores: np.ndarray, fraction: float = 0.5,
                     fallback: np.ndarray | None = None) -> np.ndarray:
    """[labels, D] unit prototypes: the mean unit embedding of each label's top ``fraction`` by margin.

    ``embeddings`` (an array or chunks, read once) are the rows of ``scores`` [N, labels], in order. A label
    no pool item carries takes its row of ``fallback`` (e.g. its prompt embedding) when given.
    """
    n_labels = scores.shape[1]
    pseudo = select(scores, SelectionConfig(top_fraction=fraction, max_label_ratio=None))
    member = np.full(len(scores), -1, dtype=np.int64)
    member[pseudo.kept] = pseudo.label[pseudo.kept]
    present = np.bincount(member[member >= 0], minlength=n_labels) > 0
    if fallback is None and not present.all():
        raise ValueError(f"no pool item is labelled {int(np.flatnonzero(~present)[0])}: cannot build its prototype")
    means, _ = _label_means(embeddings, lambda offset, units: member[offset:offset + len(units)], n_labels,
                            expected_rows=len(scores))
    dimension = means.shape[1] if means.shape[1] else np.asarray(fallback).shape[1]
    prototypes = np.zeros((n_labels, dimension), dtype=np.float32)
    prototypes[present] = means[present]
    if not present.all():
        prototypes[~present] = np.asarray(fallback, dtype=np.float32)[~present]
    return unit_rows(prototypes)


class PoolEmbeddings:
    """A stored pool's embeddings as [rows, D] float32 chunks, read from its ``.h5`` shards on each pass.

    Iterating it reads ``chunk_rows`` rows at a time (``embeddings_dir`` may be a URI: one shard at a time
    is fetched), checking that the rows come in the order of ``ids``; it can be iterated any number of times.
    """

    def __init__(self, embeddings_dir: str | Path, ids: Sequence[int] | np.ndarray, chunk_rows: int = 65_536):
        self.path = str(embeddings_dir)
        self.corpus = H5Corpus(embeddings_dir)
        self.ids = np.asarray(ids, dtype=np.int64)
        self.chunk_rows = chunk_rows
        if len(self.corpus) != len(self.ids):
            raise ValueError(f"{self.path} has {len(self.corpus)} rows, expected {len(self.ids)}")

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[np.ndarray]:
        position = 0
        for chunk_ids, embeddings in self.corpus.iter_chunks(self.chunk_rows):
            if not np.array_equal(chunk_ids, self.ids[position:position + len(chunk_ids)]):
                raise ValueError(f"{self.path}: rows {position}.. are not the pool's ids in the scored order")
            position += len(chunk_ids)
            yield embeddings
        if position != len(self.ids):
            raise ValueError(f"{self.path} has {position} rows, expected {len(self.ids)}")


def pool_embeddings(embeddings_dir: str | Path, ids: Sequence[int], chunk_rows: int = 65_536) -> PoolEmbeddings:
    """The pool's stored embeddings in the order of ``ids`` (as ``score_pool`` returned them), streamed."""
    return PoolEmbeddings(embeddings_dir, ids, chunk_rows)


def classify_by_prototypes(text_embeddings: Embeddings, prototypes: np.ndarray) -> np.ndarray:
    return prototype_scores(text_embeddings, prototypes).argmax(axis=1)


def refine_prototypes(embeddings: Embeddings, prototypes: np.ndarray, iterations: int) -> np.ndarray:
    """Spherical k-means over the pool seeded by ``prototypes``; a label whose cluster empties keeps its seed.

    Each iteration is one pass over ``embeddings`` (assign every row to its nearest prototype, sum per
    label); it stops early when no prototype moves.
    """
    current = unit_rows(np.asarray(prototypes, dtype=np.float32))
    if iterations > 1 and iter(embeddings) is embeddings:
        raise TypeError("refine_prototypes reads the embeddings once per iteration: pass an array or a "
                        "re-iterable (such as pool_embeddings(...)), not an iterator")
    # faiss.Kmeans trains on one in-memory array, so the pool is streamed here: faiss assigns, we update
    for _ in range(iterations):
        means, counts = _label_means(embeddings, _nearest(current), len(current))
        updated = current.copy()
        updated[counts > 0] = means[counts > 0]
        updated = unit_rows(updated)
        if np.allclose(updated, current, atol=1e-6):
            return updated
        current = updated
    return current


def _nearest(prototypes: np.ndarray):
    """``assign`` for ``_label_means``: each row's most cosine-similar prototype, by faiss exact search."""
    import faiss

    index = faiss.IndexFlatIP(prototypes.shape[1])
    index.add(np.ascontiguousarray(prototypes, dtype=np.float32))
    return lambda offset, units: index.search(np.ascontiguousarray(units), 1)[1][:, 0]


def prototype_scores(embeddings: Embeddings, prototypes: np.ndarray) -> np.ndarray:
    """[N, labels] cosine of each item to each label's prototype (one pass over ``embeddings``)."""
    prototypes = np.asarray(prototypes, dtype=np.float32)
    scores = [units @ prototypes.T for units in _unit_chunks(embeddings)]
    return np.concatenate(scores) if scores else np.zeros((0, len(prototypes)), dtype=np.float32)
