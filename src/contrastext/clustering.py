"""Spherical k-means (faiss) on text embeddings, choosing k by silhouette, and each cluster's central rows."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from contrastext.metrics.clustering import silhouette
from contrastext.vectors import unit_rows


@dataclass
class KMeansResult:
    assignments: np.ndarray  # (n,) int64 cluster of each row
    centroids: np.ndarray  # (k, d) float32, unit rows
    inertia: float  # sum over rows of (1 - cosine to its centroid); lower is tighter


def _unit_rows(embeddings: np.ndarray) -> np.ndarray:
    x = np.asarray(embeddings, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"embeddings must be a non-empty 2-D array, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("embeddings contain NaN or infinite values")
    return np.ascontiguousarray(unit_rows(x))


def spherical_kmeans(embeddings: np.ndarray, k: int, *, seed: int = 0, niter: int = 25,
                     nredo: int = 1) -> KMeansResult:
    """k-means on the unit sphere (cosine similarity); rows are L2-normalised first, the input is untouched."""
    import faiss

    x = _unit_rows(embeddings)
    n, d = x.shape
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and the number of rows ({n})")
    # every row takes part (faiss would otherwise subsample to 256 rows per centroid)
    kmeans = faiss.Kmeans(d, k, niter=niter, nredo=nredo, seed=seed, spherical=True, verbose=False,
                          min_points_per_centroid=1, max_points_per_centroid=max(256, math.ceil(n / k)))
    kmeans.train(x)
    centroids = _unit_rows(kmeans.centroids)
    index = faiss.IndexFlatIP(d)
    index.add(centroids)
    similarity, nearest = index.search(x, 1)
    return KMeansResult(assignments=nearest[:, 0].astype(np.int64), centroids=centroids,
                        inertia=float(np.sum(1.0 - similarity[:, 0])))


def nearest_neighbours(embeddings: np.ndarray, k: int) -> np.ndarray:
    """[n, k] each row's k most cosine-similar other rows (faiss exact search), nearest first."""
    import faiss

    x = _unit_rows(embeddings)
    if not 1 <= k < x.shape[0]:
        raise ValueError(f"k={k} must be between 1 and the number of rows less one ({x.shape[0] - 1})")
    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    _, found = index.search(x, k + 1)
    own = found == np.arange(x.shape[0])[:, None]
    # a row's own index is usually first but ties may put it later or (duplicates) out of the top k + 1
    keep = np.where(own.any(axis=1, keepdims=True), ~own, np.arange(k + 1)[None, :] < k)
    return found[keep].reshape(x.shape[0], k).astype(np.int64)


def select_k_by_silhouette(embeddings: np.ndarray, k_values: Sequence[int], *, seed: int = 0,
                           sample_size: int | None = 5000) -> tuple[int, dict[int, float]]:
    """The k of ``k_values`` whose spherical k-means has the highest cosine silhouette, and every score."""
    x = _unit_rows(embeddings)
    candidates = sorted(set(int(k) for k in k_values))
    if not candidates:
        raise ValueError("k_values is empty")
    bad = [k for k in candidates if not 2 <= k < len(x)]
    if bad:
        raise ValueError(f"k values {bad} are outside 2..{len(x) - 1} (silhouette needs 2 ≤ k < rows)")
    scores = {k: silhouette(x, spherical_kmeans(x, k, seed=seed).assignments, sample_size=sample_size,
                            seed=seed) for k in candidates}
    defined = {k: s for k, s in scores.items() if not math.isnan(s)}
    if not defined:
        raise ValueError("the silhouette is undefined for every k (all rows fell in one cluster)")
    best = max(defined, key=lambda k: (defined[k], -k))
    return best, scores


def central_indices(embeddings: np.ndarray, result: KMeansResult, top_n: int) -> dict[int, list[int]]:
    """Per cluster, the row indices closest (cosine) to its centroid, most central first.

    Every cluster has a key; a cluster left empty maps to an empty list.
    """
    if top_n < 1:
        raise ValueError(f"top_n must be ≥ 1, got {top_n}")
    x = _unit_rows(embeddings)
    if len(x) != len(result.assignments):
        raise ValueError(f"{len(x)} embeddings but {len(result.assignments)} assignments")
    central: dict[int, list[int]] = {}
    for cluster in range(len(result.centroids)):
        members = np.flatnonzero(result.assignments == cluster)
        similarity = x[members] @ result.centroids[cluster]
        order = np.argsort(-similarity, kind="stable")[:top_n]
        central[cluster] = [int(i) for i in members[order]]
    return central


class Clusterer(Protocol):
    """What a façade needs of a clusterer: one cluster id (an int ≥ 0) per row of ``embeddings``."""

    def fit_predict(self, embeddings: np.ndarray) -> np.ndarray: ...


class SphericalKMeans:
    """Spherical k-means behind the clusterer protocol the façades take: ``fit_predict(embeddings) -> ids``.

    Any object with that method plugs in instead (scikit-learn's ``KMeans`` or ``AgglomerativeClustering``).
    """

    def __init__(self, n_clusters: int, *, seed: int = 0, niter: int = 25, nredo: int = 5):
        self.n_clusters = n_clusters
        self.seed = seed
        self.niter = niter
        self.nredo = nredo
        self.result_: KMeansResult | None = None

    def fit_predict(self, embeddings: np.ndarray) -> np.ndarray:
        self.result_ = spherical_kmeans(embeddings, self.n_clusters, seed=self.seed, niter=self.niter,
                                        nredo=self.nredo)
        return self.result_.assignments


def result_of_assignments(embeddings: np.ndarray, assignments: Sequence[int] | np.ndarray) -> KMeansResult:
    """A ``KMeansResult`` for cluster ids any clusterer gave: ids renumbered 0..k-1 in sorted order, each
    centroid the unit mean of its rows. A negative id (a noise label, as HDBSCAN gives) is an error."""
    x = _unit_rows(embeddings)
    ids = np.asarray(assignments).reshape(-1)
    if len(ids) != len(x):
        raise ValueError(f"{len(x)} embeddings but {len(ids)} cluster ids")
    if np.issubdtype(ids.dtype, np.number) and (ids < 0).any():
        raise ValueError("the clusterer left rows without a cluster (negative ids); every row needs one")
    _, dense = np.unique(ids, return_inverse=True)
    dense = dense.reshape(-1).astype(np.int64)
    sums = np.zeros((int(dense.max()) + 1, x.shape[1]), dtype=np.float64)
    np.add.at(sums, dense, x)
    centroids = _unit_rows(sums.astype(np.float32))
    similarity = np.einsum("nd,nd->n", x, centroids[dense])
    return KMeansResult(assignments=dense, centroids=centroids, inertia=float(np.sum(1.0 - similarity)))
