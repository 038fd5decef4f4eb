"""Spherical k-means, choosing k by silhouette, and central rows, on well-separated synthetic directions."""

import numpy as np
import pytest

from contrastext.clustering import (
    KMeansResult,
    SphericalKMeans,
    central_indices,
    result_of_assignments,
    select_k_by_silhouette,
    spherical_kmeans,
)
from contrastext.metrics.clustering import clustering_accuracy


def _blobs(k=4, per=150, dim=24, noise=0.25, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, dim))
    labels = np.repeat(np.arange(k), per)
    # scaled rows: spherical k-means must ignore the norms
    scale = rng.uniform(0.5, 5.0, size=(k * per, 1))
    x = (centres[labels] + noise * rng.normal(size=(k * per, dim))) * scale
    return x.astype(np.float32), labels


def test_recovers_separated_directions_with_unit_centroids():
    x, labels = _blobs()
    original = x.copy()
    # random initialisation can put two centroids in one group; a few restarts keep the best
    result = spherical_kmeans(x, 4, seed=0, nredo=5)
    assert isinstance(result, KMeansResult)
    assert result.assignments.shape == (len(x),) and result.assignments.dtype == np.int64
    assert clustering_accuracy(labels, result.assignments) == 1.0
    assert result.centroids.shape == (4, 24)
    np.testing.assert_allclose(np.linalg.norm(result.centroids, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(x, original)  # the input is not normalised in place


def test_assignment_is_the_nearest_centroid_and_inertia_is_the_cosine_gap():
    x, _ = _blobs(k=3, noise=0.8, seed=1)
    result = spherical_kmeans(x, 3, seed=0)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    similarity = unit @ result.centroids.T
    np.testing.assert_array_equal(result.assignments, similarity.argmax(axis=1))
    assert result.inertia == pytest.approx(float(np.sum(1 - similarity.max(axis=1))), rel=1e-4)


def test_same_seed_same_result_and_restarts_never_worse():
    x, _ = _blobs(k=6, noise=1.2, seed=2)
    a, b = spherical_kmeans(x, 6, seed=3), spherical_kmeans(x, 6, seed=3)
    np.testing.assert_array_equal(a.assignments, b.assignments)
    single = spherical_kmeans(x, 6, seed=3, nredo=1)
    several = spherical_kmeans(x, 6, seed=3, nredo=4)
    assert several.inertia <= single.inertia + 1e-3


@pytest.mark.parametrize("k", [0, 601])
def test_k_out_of_range_is_refused(k):
    x, _ = _blobs()
    with pytest.raises(ValueError, match="k="):
        spherical_kmeans(x, k)


def test_bad_embeddings_are_refused():
    with pytest.raises(ValueError, match="2-D"):
        spherical_kmeans(np.zeros(10, dtype=np.float32), 2)
    bad = np.ones((10, 4), dtype=np.float32)
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        spherical_kmeans(bad, 2)


def test_select_k_by_silhouette_finds_the_true_number():
    x, _ = _blobs(k=5, per=80, noise=0.2, seed=4)
    best, scores = select_k_by_silhouette(x, [2, 3, 5, 8], seed=0, sample_size=None)
    assert best == 5
    assert set(scores) == {2, 3, 5, 8}
    # five tight directions: the right k scores near 1, every wrong k clearly lower
    assert scores[5] == pytest.approx(0.938, abs=0.01)
    assert max(scores[k] for k in (2, 3, 8)) < 0.6


def test_select_k_refuses_impossible_values():
    x, _ = _blobs(k=2, per=5)
    with pytest.raises(ValueError, match="outside"):
        select_k_by_silhouette(x, [1, 3])
    with pytest.raises(ValueError, match="empty"):
        select_k_by_silhouette(x, [])


def test_central_indices_are_members_sorted_by_closeness():
    x, _ = _blobs(k=3, noise=0.6, seed=5)
    result = spherical_kmeans(x, 3, seed=0)
    central = central_indices(x, result, top_n=5)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    assert set(central) == {0, 1, 2}
    for cluster, rows in central.items():
        members = np.flatnonzero(result.assignments == cluster)
        assert len(rows) == 5 and set(rows) <= set(members.tolist())
        sims = unit[rows] @ result.centroids[cluster]
        assert np.all(np.diff(sims) <= 1e-6)
        assert sims[0] == pytest.approx((unit[members] @ result.centroids[cluster]).max(), abs=1e-6)


def test_central_indices_of_an_empty_cluster_and_bad_top_n():
    x, _ = _blobs(k=2, per=10)
    result = KMeansResult(assignments=np.zeros(len(x), dtype=np.int64),
                          centroids=np.eye(2, x.shape[1], dtype=np.float32), inertia=0.0)
    central = central_indices(x, result, top_n=50)
    assert len(central[0]) == len(x) and central[1] == []
    with pytest.raises(ValueError, match="top_n"):
        central_indices(x, result, top_n=0)


def test_spherical_kmeans_clusterer_is_spherical_kmeans_behind_fit_predict():
    x, labels = _blobs()
    clusterer = SphericalKMeans(4, seed=3)
    assignments = clusterer.fit_predict(x)
    expected = spherical_kmeans(x, 4, seed=3, nredo=5)
    np.testing.assert_array_equal(assignments, expected.assignments)
    np.testing.assert_array_equal(clusterer.result_.centroids, expected.centroids)
    assert clustering_accuracy(labels, assignments) == 1.0


def test_result_of_assignments_renumbers_ids_and_takes_unit_means():
    x = np.array([[2.0, 0.0], [1.0, 1.0], [0.0, 3.0], [0.0, 1.0]], dtype=np.float32)
    result = result_of_assignments(x, np.array([7, 7, 2, 2]))  # any ids: sorted order gives 2 -> 0, 7 -> 1
    np.testing.assert_array_equal(result.assignments, [1, 1, 0, 0])
    first = np.array([1.0, 0.0]) + np.array([1.0, 1.0]) / np.sqrt(2)
    np.testing.assert_allclose(result.centroids[1], first / np.linalg.norm(first), atol=1e-6)
    np.testing.assert_allclose(result.centroids[0], [0.0, 1.0], atol=1e-6)
    cosines = [first[0] / np.linalg.norm(first), (first @ np.array([1, 1]) / np.sqrt(2)) / np.linalg.norm(first), 1, 1]
    assert result.inertia == pytest.approx(sum(1 - c for c in cosines), abs=1e-5)


def test_result_of_assignments_refuses_unassigned_rows_and_a_length_mismatch():
    x = np.eye(3, dtype=np.float32)
    with pytest.raises(ValueError, match="without a cluster"):
        result_of_assignments(x, [0, -1, 1])
    with pytest.raises(ValueError, match="3 embeddings but 2"):
        result_of_assignments(x, [0, 1])
