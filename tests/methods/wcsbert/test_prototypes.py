import json
import tracemalloc

import faiss
import numpy as np
import pytest

from contrastext.data.h5store import write_shard
from contrastext.methods.wcsbert.config import PretrainConfig
from contrastext.methods.wcsbert.prototypes import (
    PoolEmbeddings,
    classify_by_prototypes,
    label_prototypes,
    pool_embeddings,
    prototype_scores,
    refine_prototypes,
)
from contrastext.methods.wcsbert.pseudo_labels import SelectionConfig, select
from contrastext.methods.wcsbert.category_pretraining import pretrained_model_is_used


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _two_clusters(rng, n=200):
    centres = _unit(np.array([[1.0, 0.2, 0.0], [0.0, 0.3, 1.0]]))
    which = rng.integers(0, 2, n)
    return _unit(centres[which] + 0.15 * rng.standard_normal((n, 3))), which, centres


def test_refinement_moves_poor_seeds_onto_the_clusters_they_are_nearest():
    rng = np.random.default_rng(0)
    points, which, centres = _two_clusters(rng)
    seeds = _unit(np.array([[1.0, 0.2, 0.7], [-1.0, 0.3, 1.0]]))  # skewed: they mislabel about 15%
    assert (classify_by_prototypes(points, seeds) == which).mean() < 0.9
    refined = refine_prototypes(points, seeds, iterations=20)
    means = _unit(np.stack([points[which == k].mean(0) for k in (0, 1)]))
    np.testing.assert_allclose(refined, means, atol=1e-5)
    assert (prototype_scores(points, refined).argmax(1) == which).mean() == 1.0


def test_a_label_whose_cluster_empties_keeps_its_seed():
    rng = np.random.default_rng(1)
    points, _, centres = _two_clusters(rng)
    far = np.array([[-1.0, 0.0, 0.0]])  # nothing is nearest to it
    refined = refine_prototypes(points, np.vstack([centres, far]), iterations=5)
    np.testing.assert_allclose(refined[2], far[0])
    assert np.allclose(np.linalg.norm(refined, axis=1), 1.0)


def test_zero_iterations_return_the_seeds_and_prototypes_come_from_confident_items():
    rng = np.random.default_rng(2)
    points, which, centres = _two_clusters(rng)
    scores = points @ centres.T  # stands in for prompt scores
    seeds = label_prototypes(points, scores, fraction=0.5)
    np.testing.assert_allclose(refine_prototypes(points, seeds, 0), seeds, atol=1e-6)
    assert prototype_scores(points, seeds).shape == (len(points), 2)
    assert (np.abs(seeds - centres).max()) < 0.2


def test_pretrained_model_is_used_by_the_rule():
    always, if_better = PretrainConfig(use="always"), PretrainConfig()  # the default: if_dev_improves
    worse = {"dev_before": {"map@3": 0.6}, "dev_after": {"map@3": 0.58}}
    better = {"dev_before": {"map@3": 0.6}, "dev_after": {"map@3": 0.65}}
    assert pretrained_model_is_used(always, worse)
    assert not pretrained_model_is_used(if_better, worse)
    assert pretrained_model_is_used(if_better, better)
    assert pretrained_model_is_used(if_better, {"dev_before": {}, "dev_after": {}})  # no dev pages
    # a tie: the dump sample's full pretraining, MAP@3 0.6 before and after, summed in another order
    tie = {"dev_before": {"map@3": 0.5999999999999999}, "dev_after": {"map@3": 0.6}}
    assert not pretrained_model_is_used(if_better, tie)


# ---------------------------------------------------------------- streamed over chunks, as on a full pool

def _old_label_prototypes(embeddings, scores, fraction=0.5, fallback=None):
    """The in-memory computation the streamed one replaces."""
    pseudo = select(scores, SelectionConfig(top_fraction=fraction, max_label_ratio=None))
    units = _unit(np.asarray(embeddings, dtype=np.float32))
    prototypes = np.zeros((scores.shape[1], units.shape[1]), dtype=np.float32)
    for label in range(scores.shape[1]):
        members = pseudo.kept[pseudo.label[pseudo.kept] == label]
        prototypes[label] = fallback[label] if len(members) == 0 else units[members].mean(axis=0)
    return _unit(prototypes)


def _old_refine(embeddings, prototypes, iterations):
    units = _unit(np.asarray(embeddings, dtype=np.float32))
    current = _unit(np.asarray(prototypes, dtype=np.float32))
    for _ in range(iterations):
        nearest = (units @ current.T).argmax(axis=1)
        updated = current.copy()
        for label in range(len(current)):
            if (nearest == label).any():
                updated[label] = units[nearest == label].mean(axis=0)
        updated = _unit(updated)
        if np.allclose(updated, current, atol=1e-6):
            return updated
        current = updated
    return current


class Chunks:
    """A re-iterable pool that is never an array: it counts its passes and the largest chunk it gave."""

    def __init__(self, embeddings, rows):
        self.embeddings, self.rows, self.passes, self.largest = embeddings, rows, 0, 0

    def __iter__(self):
        self.passes += 1
        for start in range(0, len(self.embeddings), self.rows):
            chunk = self.embeddings[start:start + self.rows]
            self.largest = max(self.largest, len(chunk))
            yield chunk


def _pool(n=600, labels=4, dimension=12, seed=5):
    rng = np.random.default_rng(seed)
    centres = _unit(rng.standard_normal((labels, dimension)))
    which = rng.integers(0, labels, n)
    points = (centres[which] + 0.6 * rng.standard_normal((n, dimension))).astype(np.float32)
    prompts = _unit(centres + 0.5 * rng.standard_normal(centres.shape))  # stand in for the label prompts
    return points, _unit(points) @ prompts.T, prompts


def test_streamed_prototypes_equal_the_in_memory_computation():
    points, scores, prompts = _pool()
    want_seeds = _old_label_prototypes(points, scores, 0.3)
    for source in (points, Chunks(points, 1), Chunks(points, 64), Chunks(points, 599), [points[:10], points[10:]]):
        seeds = label_prototypes(source, scores, 0.3)
        np.testing.assert_allclose(seeds, want_seeds, atol=1e-6)
        for iterations in (0, 1, 3, 50):
            np.testing.assert_allclose(refine_prototypes(source, seeds, iterations),
                                       _old_refine(points, want_seeds, iterations), atol=1e-5)
        np.testing.assert_allclose(prototype_scores(source, seeds), _unit(points) @ want_seeds.T, atol=1e-6)
    # a label no confident item takes gets its fallback, streamed too
    skewed = scores.copy()
    skewed[:, 3] -= 10
    np.testing.assert_allclose(label_prototypes(Chunks(points, 50), skewed, fallback=prompts),
                               _old_label_prototypes(points, skewed, fallback=prompts), atol=1e-6)
    with pytest.raises(ValueError, match="no pool item is labelled 3"):
        label_prototypes(Chunks(points, 50), skewed)


def test_streamed_refinement_equals_faiss_kmeans_seeded_by_the_prototypes():
    points, scores, _ = _pool()
    seeds = label_prototypes(points, scores, 0.3)
    for iterations in (1, 3, 50):
        kmeans = faiss.Kmeans(points.shape[1], len(seeds), niter=iterations, spherical=True,
                              min_points_per_centroid=1, max_points_per_centroid=len(points))
        kmeans.train(np.ascontiguousarray(_unit(points), dtype=np.float32), init_centroids=seeds)
        np.testing.assert_allclose(refine_prototypes(Chunks(points, 64), seeds, iterations), kmeans.centroids,
                                   atol=1e-5)


def test_prototypes_read_chunks_not_an_array():
    points, scores, _ = _pool()
    # one-shot generators of (ids, embeddings), as H5Corpus.iter_chunks yields them, for the one-pass steps
    chunks = ((np.arange(s, s + 100), points[s:s + 100]) for s in range(0, len(points), 100))
    seeds = label_prototypes(chunks, scores)
    np.testing.assert_allclose(seeds, _old_label_prototypes(points, scores), atol=1e-6)
    assert classify_by_prototypes((points[s:s + 7] for s in range(0, 600, 7)), seeds).shape == (600,)
    # refinement reads the pool once per iteration, never more than a chunk at a time
    pool = Chunks(points, 32)
    refined = refine_prototypes(pool, seeds, iterations=50)
    np.testing.assert_allclose(refined, _old_refine(points, seeds, 50), atol=1e-5)
    assert pool.largest == 32 and 1 < pool.passes < 50  # converged early
    with pytest.raises(TypeError, match="re-iterable"):
        refine_prototypes(iter(Chunks(points, 32)), seeds, iterations=2)
    with pytest.raises(ValueError, match="more rows than the scores"):
        label_prototypes(Chunks(points, 32), scores[:599])
    with pytest.raises(ValueError, match="599 rows, the scores 600"):
        label_prototypes(Chunks(points[:599], 32), scores)


def test_memory_is_bounded_by_a_chunk_not_the_pool():
    n, dimension, rows = 100_000, 256, 2_000
    noise = 0.3 * np.random.default_rng(0).standard_normal((rows, dimension), dtype=np.float32)
    centres = np.eye(3, dimension, dtype=np.float32)

    class Synthetic:
        """100,000 × 256 float32 (102 MB) that only ever exist one chunk (2 MB) at a time."""

        def __iter__(self):
            for start in range(0, n, rows):
                yield centres[np.random.default_rng(start).integers(0, 3, rows)] + noise

    scores = np.concatenate([chunk[:, :3] for chunk in Synthetic()])  # [N, labels]: held, as score_pool does
    tracemalloc.start()
    try:
        seeds = label_prototypes(Synthetic(), scores)
        refined = refine_prototypes(Synthetic(), seeds, iterations=3)
        out = prototype_scores(Synthetic(), refined)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.shape == (n, 3) and (out.argmax(1) == scores.argmax(1)).mean() > 0.95
    # the in-memory functions held the whole pool's unit embeddings (n × dimension × 4 bytes) at least
    assert peak < n * dimension * 4 / 4, peak


ATTRS = {"dimension": 12, "model": "tiny", "max_words": 200}


def test_a_stored_pool_streams_from_its_shards_in_the_scored_order(tmp_path):
    points, scores, _ = _pool()
    ids = np.arange(1_000, 1_600)
    shards = [write_shard(tmp_path, k, ids[s:s + 250], points[s:s + 250], ATTRS, dtype="float32")
              for k, s in enumerate(range(0, 600, 250))]
    (tmp_path / "manifest.json").write_text(json.dumps({"attributes": ATTRS, "shards": shards}))
    stored = pool_embeddings(tmp_path, ids, chunk_rows=64)
    assert isinstance(stored, PoolEmbeddings) and not isinstance(stored, np.ndarray) and len(stored) == 600
    assert max(len(c) for c in stored) == 64
    seeds = label_prototypes(stored, scores, fallback=None)
    np.testing.assert_allclose(seeds, _old_label_prototypes(points, scores), atol=1e-6)
    np.testing.assert_allclose(refine_prototypes(stored, seeds, 10), _old_refine(points, seeds, 10), atol=1e-5)
    np.testing.assert_allclose(prototype_scores(stored, seeds), _unit(points) @ seeds.T, atol=1e-6)
    with pytest.raises(ValueError, match="has 600 rows, expected 599"):
        pool_embeddings(tmp_path, ids[:599])
    with pytest.raises(ValueError, match="scored order"):
        list(pool_embeddings(tmp_path, ids[::-1]))
