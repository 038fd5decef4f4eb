"""The label-free round guard: neighbour agreement and label anchors under a fixed reference, and which round
it keeps."""

import numpy as np
import pytest

from contrastext.clustering import nearest_neighbours
from contrastext.methods.wcsbert.config import WCSBertConfig
from contrastext.methods.wcsbert.guard import anchored_share, guard_reference, neighbour_kappa, sample_positions
from contrastext.methods.wcsbert.stored_rounds import round_stop


def _clusters(n_per: int = 60, k: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, 16)) * 4
    truth = np.repeat(np.arange(k), n_per)
    return centres[truth] + rng.normal(size=(len(truth), 16)), truth


def test_neighbours_exclude_the_row_itself_and_come_nearest_first():
    x = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9], [-1, 0]], dtype=np.float32)
    found = nearest_neighbours(x, 2)
    assert found.shape == (5, 2)
    assert all(i not in row for i, row in enumerate(found))
    assert found[0, 0] == 1 and found[2, 0] == 3
    duplicates = np.ones((4, 3), dtype=np.float32)  # ties: each row still gets k others, never itself
    assert all(i not in row for i, row in enumerate(nearest_neighbours(duplicates, 3)))
    with pytest.raises(ValueError):
        nearest_neighbours(x, 5)


def _reference(x: np.ndarray, k: int = 8, label_embeddings: np.ndarray | None = None):
    """A reference over every row of ``x``; by default each label's string is its cluster's centre."""
    if label_embeddings is None:
        label_embeddings = np.stack([x[i * 60:(i + 1) * 60].mean(axis=0) for i in range(4)])
    return guard_reference(np.arange(len(x)) + 1000, x, label_embeddings, np.arange(len(label_embeddings)), 4, k)


def test_kappa_rewards_labels_that_follow_the_clusters_and_not_a_single_label():
    x, truth = _clusters()
    reference = _reference(x)
    rng = np.random.default_rng(1)
    noisy = truth.copy()
    flip = rng.random(len(truth)) < 0.4
    noisy[flip] = rng.integers(0, 4, flip.sum())
    right, worse = reference.score(truth), reference.score(noisy)
    assert right.kappa > 0.9 and worse.kappa < right.kappa - 0.2
    assert reference.score(np.zeros_like(truth)).kappa == 0.0  # everything alike is no structure
    assert neighbour_kappa(truth, reference.neighbours) == right.kappa
    assert right.value == right.kappa  # every label sits nearest its own name


def test_clusters_named_wrongly_lose_their_anchor_though_kappa_stays():
    x, truth = _clusters()
    reference = _reference(x)
    swapped = np.array([1, 0, 2, 3])[truth]  # clusters 0 and 1 trade names: neighbourhoods intact
    right, wrong = reference.score(truth), reference.score(swapped)
    assert wrong.kappa == right.kappa
    assert right.anchored == 1.0 and wrong.anchored == 0.5
    assert wrong.value == 0.5 * right.value
    kept = truth < 3  # label 3 gets no items: an empty label is not anchored
    assert anchored_share(truth[kept], x[kept], reference.label_embeddings, reference.owner, 4) == 0.75


def test_aliases_anchor_a_label_by_its_best_string():
    x, truth = _clusters()
    centres = np.stack([x[truth == i].mean(axis=0) for i in range(4)])
    rng = np.random.default_rng(3)
    far = rng.normal(size=(4, x.shape[1]))  # a second, useless string per label
    strings, owner = np.concatenate([centres, far]), np.concatenate([np.arange(4), np.arange(4)])
    assert anchored_share(truth, x, strings, owner, 4) == 1.0


def test_the_sample_is_seeded_sorted_and_all_when_the_pool_is_small():
    positions = sample_positions(240, 100, seed=0)
    assert len(positions) == 100 and np.all(np.diff(positions) > 0)
    assert np.array_equal(positions, sample_positions(240, 100, seed=0))
    assert not np.array_equal(positions, sample_positions(240, 100, seed=1))
    assert np.array_equal(sample_positions(50, 100, seed=0), np.arange(50))
    with pytest.raises(ValueError, match="two pool items"):
        guard_reference(np.array([1]), np.ones((1, 4)), np.ones((2, 4)), np.arange(2), 2, 3)


def _config(**rounds) -> WCSBertConfig:
    return WCSBertConfig.model_validate({"rounds": {"rounds": 5, "min_change": 0.0, **rounds}})


def test_the_guard_keeps_the_round_0_model_when_round_1_lowers_it():
    stop = round_stop(_config(), guard_0=0.50)
    assert stop.after({"round": 1, "guard": 0.45, "labels_changed": 0.2}) is True
    assert stop.best_round == 0 and "round-0 model" in stop.reason


def test_the_guard_keeps_the_best_round_and_waits_out_its_patience():
    stop = round_stop(_config(patience=2), guard_0=0.50)
    assert not stop.after({"round": 1, "guard": 0.55, "labels_changed": 0.2})
    assert not stop.after({"round": 2, "guard": 0.54, "labels_changed": 0.1})
    assert stop.after({"round": 3, "guard": 0.53, "labels_changed": 0.1})
    assert stop.best_round == 1


def test_the_jobs_rule_keeps_a_later_round_whose_teacher_still_relabels_many_texts():
    blend = {"head": "blend"}
    for still_learning, kept in ((0.13, 2), (None, 1)):
        stop = round_stop(_config(still_learning=still_learning), guard_0=0.50)
        assert not stop.after({"round": 1, "guard": 0.55, "labels_changed": None, **blend,
                               "guard_heads": {"prompts": 0.55, "blend": 0.60}})
        stop.after({"round": 2, "guard": 0.56, "labels_changed": 0.15, **blend,
                    "guard_heads": {"prompts": 0.56, "blend": 0.58}})  # the blend's guard falls
        assert stop.best_round == kept


def test_without_the_guard_the_last_round_is_kept_until_labels_settle():
    stop = round_stop(_config(min_change=0.05), guard_0=None)
    assert not stop.after({"round": 1, "labels_changed": None})
    assert stop.after({"round": 2, "labels_changed": 0.01}) and stop.best_round == 2
    assert "settled" in stop.reason


def test_the_round_0_model_is_scored_from_the_embeddings_the_guard_was_built_with(tiny_encoder_dir):
    from contrastext.methods.wcsbert.guard import TextGuard
    from contrastext.models import TextEncoder
    from contrastext.zeroshot import LabelSet

    encoder = TextEncoder.from_pretrained(tiny_encoder_dir, max_length=32)
    texts = [f"{word} {word} match number {i}" for i, word in enumerate(["goal", "bank", "phone"] * 8)]
    guard = TextGuard.build(encoder, texts, LabelSet.build(["Football", "Finance", "Phones"]), ("{label}",),
                            sample=20, neighbours=3, seed=0, heads=("prompts", "prototypes"))
    kept, again = guard.score(), guard.score(encoder)  # the first encodes nothing, the second the sample again
    assert kept.scores.keys() == again.scores.keys() == {"prompts", "prototypes"}
    for head in kept.scores:
        assert kept.scores[head].value == pytest.approx(again.scores[head].value, abs=1e-6)
    np.testing.assert_allclose(kept.heads["prototypes"].vectors, again.heads["prototypes"].vectors, atol=1e-5)
    # a trained model needs a larger lead of its prototypes to deliver them than the round-0 model does
    from contrastext.methods.wcsbert.guard import PROTOTYPE_MARGIN, TRAINED_PROTOTYPE_MARGIN

    assert (kept.margin, again.margin) == (PROTOTYPE_MARGIN, TRAINED_PROTOTYPE_MARGIN)


def test_the_prototypes_are_delivered_only_with_a_lead_larger_than_the_margin():
    from contrastext.methods.wcsbert.guard import GuardScore, HeadScores

    def scores(prompts: float, prototypes: float, margin: float) -> HeadScores:
        return HeadScores({"prompts": GuardScore(prompts, 1.0), "prototypes": GuardScore(prototypes, 1.0)}, {}, margin)

    assert scores(0.50, 0.57, 0.05).best == "prototypes" and scores(0.50, 0.57, 0.10).best == "prompts"
    assert scores(0.50, 0.61, 0.10).best == "prototypes" and scores(0.50, 0.61, 0.10).value == 0.50
