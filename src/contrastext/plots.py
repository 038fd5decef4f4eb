"""Report figures written as PNG files (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def project_2d(embeddings: np.ndarray, method: Literal["tsne", "pca"] = "tsne", seed: int = 0) -> np.ndarray:
    """2-D coordinates of the rows: t-SNE (perplexity fitted to small sets) or PCA."""
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE

    x = np.asarray(embeddings, dtype=np.float32)
    if len(x) < 3:
        return np.pad(x[:, :2], ((0, 0), (0, max(0, 2 - x.shape[1]))))
    if method == "pca":
        return PCA(n_components=2, random_state=seed).fit_transform(x)
    perplexity = float(min(30.0, max(2.0, (len(x) - 1) / 3)))
    return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(x)


def scatter_2d(points: np.ndarray, groups: Sequence[Any], path: str | Path, title: str,
               max_legend: int = 20) -> Path:
    """Scatter of 2-D points coloured by group (label or cluster)."""
    plt = _pyplot()
    groups = np.asarray([str(g) for g in groups])
    names = sorted(set(groups.tolist()))
    cmap = plt.get_cmap("tab20" if len(names) > 10 else "tab10")
    fig, ax = plt.subplots(figsize=(8, 7))
    for i, name in enumerate(names):
        mask = groups == name
        ax.scatter(points[mask, 0], points[mask, 1], s=6, alpha=0.7, color=cmap(i % cmap.N),
                   label=name if len(names) <= max_legend else None)
    if len(names) <= max_legend:
        ax.legend(markerscale=3, fontsize=7, loc="best")
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
    return _save(fig, path)


def metric_lines(rows: Sequence[dict[str, Any]], x: str, keys: Sequence[str], path: str | Path,
                 title: str) -> Path:
    """One line per metric over ``x`` (epoch, round, …); rows missing a key are left out of its line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for key in keys:
        points = [(row[x], row[key]) for row in rows if row.get(key) is not None]
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o", label=key)
    ax.set_xlabel(x)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def confusion_matrix_plot(matrix: np.ndarray, labels: Sequence[str], path: str | Path, title: str) -> Path:
    """Row-normalised confusion matrix (rows: true label, columns: predicted) with counts in the cells."""
    plt = _pyplot()
    matrix = np.asarray(matrix)
    share = matrix / np.maximum(matrix.sum(axis=1, keepdims=True), 1)
    fig, ax = plt.subplots(figsize=(1.2 * len(labels) + 3, 1.0 * len(labels) + 2.5))
    ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    for i in range(len(labels)):
        for j in range(len(labels)):
            ax.text(j, i, str(int(matrix[i, j])), ha="center", va="center",
                    color="white" if share[i, j] > 0.5 else "black", fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title)
    return _save(fig, path)


def _save(fig, path: str | Path) -> str | Path:
    """Save a figure to a local path or a URI (rendered in memory, then written whole)."""
    import io

    from contrastext import storage

    fig.tight_layout()
    if storage.is_uri(path):
        buffer = io.BytesIO()
        fig.savefig(buffer, dpi=110, format="png")
        _pyplot().close(fig)
        return storage.write_bytes(path, buffer.getvalue())
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path
