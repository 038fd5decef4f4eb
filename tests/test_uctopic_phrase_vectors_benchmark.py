"""The label-free alternatives of the phrase-vector benchmark do what their names say."""

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import uctopic_phrase_vectors as bench  # noqa: E402


def test_contexts_pooled_by_phrase_average_each_phrases_mentions():
    x = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 3.0]])
    pooled = bench._pooled_by_phrase(x, ["Paris", "Paris", "Bonn"])
    assert np.allclose(pooled, [[0.5, 0.5], [0.5, 0.5], [3.0, 3.0]])


def _two_groups(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(2, 48))
    truth = np.repeat([0, 1], 40)
    return centres[truth] + 0.05 * rng.normal(size=(80, 48)), truth


def test_every_clusterer_recovers_two_separate_groups():
    x, truth = _two_groups()
    for cluster in (bench._kmeans, bench._gmm_on_pca, bench._overclustered):
        found = np.asarray(cluster(x.astype("float32"), 2, 0))
        agree = (found == truth).mean()
        assert max(agree, 1 - agree) == 1.0, cluster.__name__


def test_whitening_gives_each_kept_direction_the_same_variance():
    x, _ = _two_groups()
    white = bench._whitened(x, 8)
    assert white.shape == (80, 8)
    assert np.allclose(white.std(axis=0), white.std(axis=0)[0])


def test_every_alternative_runs_on_the_vectors_a_draw_holds():
    x, truth = _two_groups()
    rng = np.random.default_rng(1)
    vectors = {"in_context": x, "alone": x + 0.01 * rng.normal(size=x.shape), "question": x,
               "phrases": [f"phrase {i % 30}" for i in range(len(x))]}
    for name, (make, cluster) in bench.ALTERNATIVES.items():
        found = np.asarray(cluster(make(vectors).astype("float32"), 2, 0))
        assert found.shape == truth.shape and set(found.tolist()) <= {0, 1}, name
    results = [{"set": "conll_test", "alternatives": {name: 0.5 for name in bench.ALTERNATIVES}}]
    results[0]["alternatives"]["each part centred"] = 0.6
    summary = bench.alternatives_table(results)
    assert summary["each part centred"]["above_default"] == 1
    assert summary["default"]["above_default"] == 0
