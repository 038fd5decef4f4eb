import numpy as np

from contrastext.pipelines.wcsbert import _pretrained_model_is_used
from contrastext.selftrain.config import PretrainConfig
from contrastext.selftrain.prototypes import (
    classify_by_prototypes,
    label_prototypes,
    prototype_scores,
    refine_prototypes,
)


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
    always, if_better = PretrainConfig(), PretrainConfig(use="if_dev_improves")
    worse = {"dev_before": {"map@3": 0.6}, "dev_after": {"map@3": 0.58}}
    better = {"dev_before": {"map@3": 0.6}, "dev_after": {"map@3": 0.65}}
    assert _pretrained_model_is_used(always, worse)
    assert not _pretrained_model_is_used(if_better, worse)
    assert _pretrained_model_is_used(if_better, better)
    assert _pretrained_model_is_used(if_better, {"dev_before": {}, "dev_after": {}})  # no dev pages
