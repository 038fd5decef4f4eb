"""ACC (Hungarian), NMI, AMI and cosine silhouette against hand-worked cases and direct computation."""

import math

import numpy as np
import pytest

from contrastext.metrics.clustering import ami, clustering_accuracy, clustering_scores, nmi, silhouette


def test_acc_ignores_cluster_names():
    labels = ["a", "a", "b", "b", "c", "c"]
    assert clustering_accuracy(labels, [2, 2, 0, 0, 1, 1]) == 1.0
    assert nmi(labels, [2, 2, 0, 0, 1, 1]) == pytest.approx(1.0)
    assert ami(labels, [2, 2, 0, 0, 1, 1]) == pytest.approx(1.0)


def test_acc_uses_the_best_one_to_one_mapping():
    # cluster 0 holds a,a,a,b; cluster 1 holds b,b,a; cluster 2 holds c,c,b
    labels = ["a", "a", "a", "b", "b", "b", "a", "c", "c", "b"]
    clusters = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    # best mapping 0→a (3), 1→b (2), 2→c (2): 7 of 10; a greedy majority vote would also reach 7 here,
    # but mapping two clusters to the same label is not allowed
    assert clustering_accuracy(labels, clusters) == pytest.approx(0.7)


def test_acc_where_majority_vote_and_hungarian_differ():
    # both clusters are mostly "a"; one-to-one forces one of them to "b"
    labels = ["a", "a", "a", "b", "a", "a", "b", "b"]
    clusters = [0, 0, 0, 0, 1, 1, 1, 1]
    assert clustering_accuracy(labels, clusters) == pytest.approx(5 / 8)


def test_extra_clusters_count_as_wrong():
    labels = [0, 0, 1, 1]
    assert clustering_accuracy(labels, [0, 1, 2, 3]) == pytest.approx(0.5)


def test_random_clusters_have_ami_near_zero_but_positive_nmi():
    rng = np.random.default_rng(0)
    labels, clusters = rng.integers(0, 5, 2000), rng.integers(0, 5, 2000)
    assert abs(ami(labels, clusters)) < 0.01
    assert 0 < nmi(labels, clusters) < 0.02


def test_length_mismatch_and_empty_are_errors():
    with pytest.raises(ValueError, match="length"):
        clustering_accuracy([0, 1], [0])
    with pytest.raises(ValueError, match="no rows"):
        nmi([], [])


def test_silhouette_is_the_cosine_one():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(60, 8)).astype(np.float32)
    clusters = (x[:, 0] > 0).astype(int)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    distance = 1 - unit @ unit.T
    values = []
    for i in range(len(x)):
        same = clusters == clusters[i]
        a = distance[i, same & (np.arange(len(x)) != i)].mean()
        b = distance[i, ~same].mean()
        values.append((b - a) / max(a, b))
    assert silhouette(x, clusters, sample_size=None) == pytest.approx(float(np.mean(values)), abs=1e-5)
    # scaling rows changes nothing under the cosine distance
    assert silhouette(x * 7, clusters, sample_size=None) == pytest.approx(silhouette(x, clusters, sample_size=None),
                                                                        abs=1e-5)


def test_silhouette_sampling_and_undefined_cases():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(500, 4)).astype(np.float32)
    clusters = (x[:, 0] > 0).astype(int)
    full = silhouette(x, clusters, sample_size=None)
    sampled = silhouette(x, clusters, sample_size=200, seed=0)
    assert sampled == silhouette(x, clusters, sample_size=200, seed=0)
    assert abs(sampled - full) < 0.1
    assert math.isnan(silhouette(x, np.zeros(500)))
    with pytest.raises(ValueError, match="do not match"):
        silhouette(x, clusters[:10])


def test_clustering_scores_gives_what_the_inputs_allow():
    x = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], dtype=np.float32)
    assert set(clustering_scores([0, 0, 1, 1], embeddings=x)) == {"silhouette"}
    scores = clustering_scores([0, 0, 1, 1], embeddings=x, labels=["x", "x", "y", "y"])
    assert set(scores) == {"silhouette", "acc", "nmi", "ami"} and scores["acc"] == 1.0


def test_silhouette_of_sparse_rows_matches_the_dense_one():
    import scipy.sparse

    rng = np.random.default_rng(3)
    dense = rng.random((60, 40)) * (rng.random((60, 40)) < 0.2)  # mostly zeros, as TF-IDF rows are
    dense[:30, :5] += 1.0
    dense[30:, 5:10] += 1.0
    clusters = np.repeat([0, 1], 30)
    sparse = scipy.sparse.csr_matrix(dense)
    assert silhouette(sparse, clusters) == pytest.approx(silhouette(dense, clusters), abs=1e-5)
    assert silhouette(sparse, clusters) > 0.3
    assert silhouette(sparse, clusters, sample_size=20, seed=1) == pytest.approx(
        silhouette(dense, clusters, sample_size=20, seed=1), abs=1e-5)
