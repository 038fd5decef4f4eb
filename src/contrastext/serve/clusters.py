"""What /v1/cluster returns for a set of embedded texts: spherical k-means, central texts, keywords, a 2-D view."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from contrastext.clustering import central_indices, select_k_by_silhouette, spherical_kmeans
from contrastext.plots import project_2d

AUTO_MAX_K = 10


def class_tfidf_keywords(texts: Sequence[str], assignments: np.ndarray, k: int, top_n: int) -> list[list[str]]:
    """Top words per cluster by class-based TF-IDF: each cluster's texts form one document.

    A word scores its frequency in the cluster times log(1 + mean words per cluster / its frequency in
    all clusters), so words frequent in one cluster and rare elsewhere come first.
    """
    from sklearn.feature_extraction.text import CountVectorizer

    documents = [" ".join(texts[i] for i in np.flatnonzero(assignments == c)) for c in range(k)]
    vectorizer = CountVectorizer(stop_words="english", token_pattern=r"(?u)\b[^\W\d_][\w'-]+\b", lowercase=True)
    try:
        counts = vectorizer.fit_transform(documents).toarray().astype(np.float64)
    except ValueError:  # nothing left but stop words and numbers
        return [[] for _ in range(k)]
    words = vectorizer.get_feature_names_out()
    per_cluster = counts.sum(axis=1, keepdims=True)
    tf = counts / np.maximum(per_cluster, 1.0)
    idf = np.log1p(per_cluster.mean() / np.maximum(counts.sum(axis=0), 1.0))
    scores = tf * idf
    keywords = []
    for c in range(k):
        order = np.argsort(-scores[c], kind="stable")[:top_n]
        keywords.append([str(words[i]) for i in order if counts[c, i] > 0])
    return keywords


def cluster_texts(texts: Sequence[str], embeddings: np.ndarray, k: int | str, *, top_texts: int = 3,
                  top_keywords: int = 5, seed: int = 0) -> dict[str, Any]:
    """Clusters of ``texts`` from their embeddings; ``k="auto"`` tries 2..min(10, n-1) by silhouette."""
    n = len(texts)
    if n != len(embeddings):
        raise ValueError(f"{n} texts but {len(embeddings)} embeddings")
    silhouettes = None
    if k == "auto":
        k, scores = select_k_by_silhouette(embeddings, range(2, min(AUTO_MAX_K, n - 1) + 1), seed=seed)
        silhouettes = {int(key): float(value) for key, value in scores.items()}
    k = int(k)
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and the number of texts ({n})")
    result = spherical_kmeans(embeddings, k, seed=seed)
    central = central_indices(embeddings, result, top_texts)
    keywords = class_tfidf_keywords(texts, result.assignments, k, top_keywords)
    sizes = np.bincount(result.assignments, minlength=k)
    points = project_2d(embeddings, "pca", seed=seed)
    return {
        "k": k,
        "silhouette": silhouettes,
        "assignments": [int(a) for a in result.assignments],
        "sizes": [int(s) for s in sizes],
        "clusters": [{"cluster": c, "size": int(sizes[c]),
                      "central": [{"index": i, "text": texts[i]} for i in central[c]],
                      "keywords": keywords[c]} for c in range(k)],
        "points": [[float(x), float(y)] for x, y in np.nan_to_num(points)],
    }
