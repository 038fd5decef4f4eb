"""Clustering quality: ACC (best one-to-one label↔cluster mapping), NMI, AMI and cosine silhouette."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np


def _codes(values: Sequence[Any] | np.ndarray) -> np.ndarray:
    """Any labels (strings, ints) as dense integer codes 0..m-1."""
    _, codes = np.unique(np.asarray(values), return_inverse=True)
    return codes.reshape(-1)


def _check_pair(labels: Sequence[Any] | np.ndarray, clusters: Sequence[Any] | np.ndarray) -> None:
    if len(labels) != len(clusters):
        raise ValueError(f"labels and clusters differ in length: {len(labels)} vs {len(clusters)}")
    if len(labels) == 0:
        raise ValueError("no rows to score")


def clustering_accuracy(labels: Sequence[Any] | np.ndarray, clusters: Sequence[Any] | np.ndarray) -> float:
    """Unsupervised ACC: the share of rows right under the best one-to-one cluster→label mapping.

    The mapping is found with the Hungarian algorithm on the contingency table. With more clusters than
    labels, the extra clusters map to no label and count as wrong, as in the clustering literature.
    """
    from scipy.optimize import linear_sum_assignment

    _check_pair(labels, clusters)
    y, c = _codes(labels), _codes(clusters)
    table = np.zeros((c.max() + 1, y.max() + 1), dtype=np.int64)
    np.add.at(table, (c, y), 1)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum() / len(y))


def nmi(labels: Sequence[Any] | np.ndarray, clusters: Sequence[Any] | np.ndarray) -> float:
    from sklearn.metrics import normalized_mutual_info_score

    _check_pair(labels, clusters)
    return float(normalized_mutual_info_score(_codes(labels), _codes(clusters)))


def ami(labels: Sequence[Any] | np.ndarray, clusters: Sequence[Any] | np.ndarray) -> float:
    from sklearn.metrics import adjusted_mutual_info_score

    _check_pair(labels, clusters)
    return float(adjusted_mutual_info_score(_codes(labels), _codes(clusters)))


def silhouette(embeddings: Any, clusters: Sequence[Any] | np.ndarray, *,
               sample_size: int | None = 5000, seed: int = 0) -> float:
    """Mean cosine silhouette; on a random ``sample_size`` rows when there are more (it is O(n²)).

    ``embeddings`` is a dense array or a scipy sparse matrix (e.g. TF-IDF rows). NaN when the score is
    undefined: fewer than two clusters, or every row its own cluster.
    """
    import scipy.sparse
    from sklearn.metrics import silhouette_score

    x = embeddings.tocsr() if scipy.sparse.issparse(embeddings) else np.asarray(embeddings, dtype=np.float32)
    c = _codes(clusters)
    if x.ndim != 2 or x.shape[0] != len(c):
        raise ValueError(f"embeddings {x.shape} do not match {len(c)} cluster assignments")
    n_clusters = len(np.unique(c))
    if n_clusters < 2 or n_clusters >= len(c):
        return math.nan
    size = sample_size if sample_size is not None and sample_size < len(c) else None
    if size is not None:
        # a sample that holds one cluster only has no silhouette: score every row instead
        rng = np.random.default_rng(seed)
        index = rng.choice(len(c), size=size, replace=False)
        if len(np.unique(c[index])) < 2:
            index = np.arange(len(c))
        x, c = x[index], c[index]
    return float(silhouette_score(x, c, metric="cosine"))


def clustering_scores(clusters: Sequence[Any] | np.ndarray, *, labels: Sequence[Any] | np.ndarray | None = None,
                      embeddings: np.ndarray | None = None, sample_size: int | None = 5000,
                      seed: int = 0) -> dict[str, float]:
    """Every score the inputs allow: silhouette with embeddings, ACC/NMI/AMI with labels."""
    scores: dict[str, float] = {}
    if embeddings is not None:
        scores["silhouette"] = silhouette(embeddings, clusters, sample_size=sample_size, seed=seed)
    if labels is not None:
        scores["acc"] = clustering_accuracy(labels, clusters)
        scores["nmi"] = nmi(labels, clusters)
        scores["ami"] = ami(labels, clusters)
    return scores
