"""Spherical k-means time: contrastext.clustering (faiss) vs scikit-learn's KMeans on normalised vectors.

    python benchmarks/cluster.py [--rows 100000] [--dim 384] [--k 20] [--niter 25] [--repeats 3]

Synthetic embeddings: ``k`` random unit directions plus Gaussian noise, every row L2-normalised (on the
unit sphere Euclidean k-means and cosine k-means rank centroids alike). Both run one initialisation and
the same number of iterations over every row, alternately in this process; the figure is the ratio
scikit-learn / faiss of the median times. The table also gives each one's ACC against the generating
directions and its cosine inertia, so a faster run is not a worse clustering.
"""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np

from _common import timed, write_result  # noqa: E402
from contrastext.clustering import spherical_kmeans  # noqa: E402
from contrastext.metrics.clustering import clustering_accuracy  # noqa: E402
from contrastext.report import format_table  # noqa: E402


def synthetic(rows: int, dim: int, k: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    directions = rng.normal(size=(k, dim)).astype(np.float32)
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    labels = rng.integers(0, k, size=rows)
    x = directions[labels] + noise * rng.normal(size=(rows, dim)).astype(np.float32) / np.sqrt(dim)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), labels


def cosine_inertia(x: np.ndarray, assignments: np.ndarray, centroids: np.ndarray) -> float:
    unit = centroids / np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
    return float(np.sum(1.0 - np.einsum("ij,ij->i", x, unit[assignments])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--niter", type=int, default=25)
    parser.add_argument("--noise", type=float, default=1.5, help="noise norm relative to the unit direction")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from sklearn.cluster import KMeans

    x, labels = synthetic(args.rows, args.dim, args.k, args.noise, args.seed)
    outcome: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def run_faiss() -> None:
        result = spherical_kmeans(x, args.k, seed=args.seed, niter=args.niter, nredo=1)
        outcome["faiss"] = result.assignments, result.centroids

    def run_sklearn() -> None:
        # tol=0: all niter iterations, like faiss; one k-means++ initialisation
        model = KMeans(n_clusters=args.k, n_init=1, max_iter=args.niter, tol=0.0, random_state=args.seed,
                       algorithm="lloyd").fit(x)
        outcome["sklearn"] = model.labels_.astype(np.int64), model.cluster_centers_.astype(np.float32)

    faiss_times, sklearn_times = [], []
    for _ in range(args.repeats):  # alternate, so machine noise hits both alike
        faiss_times.append(timed(run_faiss))
        sklearn_times.append(timed(run_sklearn))
    faiss_s, sklearn_s = statistics.median(faiss_times), statistics.median(sklearn_times)
    quality = {name: {"acc": clustering_accuracy(labels, a), "cosine_inertia": cosine_inertia(x, a, c)}
               for name, (a, c) in outcome.items()}
    result = {
        "rows": args.rows, "dim": args.dim, "k": args.k, "niter": args.niter, "noise": args.noise,
        "cpu_count": os.cpu_count(), "faiss_s": faiss_times, "sklearn_s": sklearn_times,
        "faiss_median_s": faiss_s, "sklearn_median_s": sklearn_s, "ratio_sklearn_over_faiss": sklearn_s / faiss_s,
        "quality": quality,
    }
    print(format_table([
        ["faiss spherical k-means (contrastext)", faiss_s, quality["faiss"]["acc"], quality["faiss"]["cosine_inertia"]],
        ["scikit-learn KMeans (lloyd)", sklearn_s, quality["sklearn"]["acc"], quality["sklearn"]["cosine_inertia"]],
        ["ratio sklearn / faiss (time)", result["ratio_sklearn_over_faiss"], "", ""],
    ], headers=[f"{args.rows:,} × {args.dim}, k={args.k}, {args.niter} iterations", "median s", "ACC",
                "cosine inertia"]))
    print(f"written to {write_result('cluster', result)}")


if __name__ == "__main__":
    main()
