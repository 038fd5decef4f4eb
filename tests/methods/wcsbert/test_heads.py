"""The heads a WC-SBERT model can be delivered with: its label prompts, the prototypes of its own labels, or
their blend; the guard scores each, the prompts' score is the model's (whether a round beats the untrained
model), a trained model is delivered with the blend where it is asked for, and otherwise the prototypes only
where they score clearly better; a head is saved and loaded with its kind."""

import numpy as np
import pytest

from contrastext.methods.wcsbert.guard import GuardScore, HeadScores, guard_fields, guard_reference
from contrastext.methods.wcsbert.heads import LabelHead


def _misnamed_clusters(seed: int = 0):
    """Four clusters whose label names each point part of the way to the next cluster: the prompts mislabel a
    third of the texts, while the texts themselves group cleanly."""
    rng = np.random.default_rng(seed)
    k, n_per, d = 4, 80, 16
    centres = rng.normal(size=(k, d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    truth = np.repeat(np.arange(k), n_per)
    x = centres[truth] * 3 + rng.normal(size=(len(truth), d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    names = centres + 0.8 * centres[[1, 2, 3, 0]]
    names /= np.linalg.norm(names, axis=1, keepdims=True)
    return x.astype(np.float32), truth, LabelHead("prompts", names.astype(np.float32), np.arange(k), k)


def test_prototypes_of_the_prompt_labels_follow_the_texts_where_the_names_point_off():
    x, truth, prompts = _misnamed_clusters()
    prototypes = prompts.prototypes(x)
    assert prototypes.kind == "prototypes" and prototypes.vectors.shape == prompts.vectors.shape
    assert (prompts.labels(x) == truth).mean() < 0.7
    assert (prototypes.labels(x) == truth).mean() > (prompts.labels(x) == truth).mean() + 0.1


def test_a_prototype_repeats_for_each_string_of_its_label():
    x, _, prompts = _misnamed_clusters()
    owner = np.array([0, 0, 1, 2, 3, 3])  # labels 0 and 3 have two strings each
    with_aliases = LabelHead("prompts", prompts.vectors[owner], owner, 4)
    prototypes = with_aliases.prototypes(x)
    np.testing.assert_array_equal(prototypes.owner, owner)
    np.testing.assert_allclose(prototypes.vectors[0], prototypes.vectors[1])
    np.testing.assert_allclose(prototypes.scores(x), prompts.prototypes(x).scores(x), atol=1e-6)


def test_the_guard_scores_each_head_and_delivers_prototypes_that_score_clearly_better():
    x, truth, prompts = _misnamed_clusters()
    reference = guard_reference(np.arange(len(x)), x, prompts.vectors, prompts.owner, 4, 8)
    both = reference.score_heads(x, prompts.vectors, ("prompts", "prototypes"))
    assert both.scores["prototypes"].value > both.scores["prompts"].value + both.margin
    assert both.best == "prototypes" and both.value == both.scores["prompts"].value  # the round's score
    fields = guard_fields(both)
    assert fields["head"] == "prototypes" and set(fields["guard_heads"]) == {"prompts", "prototypes"}
    only = reference.score_heads(x, prompts.vectors)
    assert list(only.scores) == ["prompts"] and only.best == "prompts"


def test_prototypes_within_the_margin_leave_the_prompts_delivered():
    def scores(prototypes: float) -> HeadScores:
        return HeadScores({"prompts": GuardScore(0.5, 1.0), "prototypes": GuardScore(prototypes, 1.0)}, heads={},
                          margin=0.05)

    assert scores(0.5).best == scores(0.54).best == scores(0.3).best == "prompts"
    assert scores(0.56).best == "prototypes"
    assert HeadScores({"prototypes": GuardScore(0.2, 1.0)}, heads={}).best == "prototypes"  # the only one asked


def test_the_blend_lies_between_the_prompts_and_the_prototypes_and_follows_the_texts():
    x, truth, prompts = _misnamed_clusters()
    prototypes = prompts.prototypes(x)
    blend = prompts.blend(prototypes)
    assert blend.kind == "blend" and blend.vectors.shape == prompts.vectors.shape
    np.testing.assert_allclose(np.linalg.norm(blend.vectors, axis=1), 1.0, atol=1e-5)
    # each vector is the normalised mean: as close to its prompt as to its prototype, closer than they are
    to_prompt = (blend.vectors * prompts.vectors).sum(axis=1)
    to_prototype = (blend.vectors * prototypes.vectors).sum(axis=1)
    np.testing.assert_allclose(to_prompt, to_prototype, atol=1e-5)
    assert (to_prompt > (prompts.vectors * prototypes.vectors).sum(axis=1)).all()
    np.testing.assert_allclose(prompts.blend(prototypes, weight=0.0).vectors, prompts.vectors, atol=1e-6)
    np.testing.assert_allclose(prompts.blend(prototypes, weight=1.0).vectors, prototypes.vectors, atol=1e-6)
    assert (blend.labels(x) == truth).mean() > (prompts.labels(x) == truth).mean() + 0.1
    with pytest.raises(ValueError, match="same label strings"):
        prompts.blend(LabelHead("prototypes", prototypes.vectors[:3], np.arange(3), 3))


def test_a_trained_model_is_delivered_with_the_blend_where_it_is_asked_for():
    x, _, prompts = _misnamed_clusters()
    reference = guard_reference(np.arange(len(x)), x, prompts.vectors, prompts.owner, 4, 8)
    trained = reference.score_heads(x, prompts.vectors, ("prompts", "blend"), trained=True)
    assert list(trained.heads) == ["prompts", "blend"] and trained.best == "blend"
    np.testing.assert_allclose(trained.heads["blend"].vectors, prompts.blend(prompts.prototypes(x)).vectors)
    # the round-0 model is delivered with its prototypes where they lead by the margin (as here)
    untrained = reference.score_heads(x, prompts.vectors, ("prompts", "prototypes", "blend"))
    assert untrained.best == "prototypes" and set(untrained.scores) == {"prompts", "prototypes", "blend"}
    from contrastext.methods.wcsbert.guard import TRAINED_PROTOTYPE_MARGIN

    assert reference.score_heads(x, prompts.vectors, ("prompts", "prototypes"), trained=True).margin == (
        TRAINED_PROTOTYPE_MARGIN)

    def scores(blend: float, trained: bool, prototypes: float = 0.5) -> HeadScores:
        return HeadScores({"prompts": GuardScore(0.5, 1.0), "prototypes": GuardScore(prototypes, 1.0),
                           "blend": GuardScore(blend, 1.0)}, {}, 0.05, trained)

    assert scores(0.3, trained=True).best == scores(0.9, trained=True, prototypes=0.9).best == "blend"
    assert scores(0.9, trained=True).value == 0.5  # the model's score is its prompts'
    # the round-0 model: its prototypes with a lead over its prompts larger than the margin, else its prompts
    assert scores(0.3, trained=False, prototypes=0.56).best == "prototypes"
    assert scores(0.3, trained=False, prototypes=0.54).best == scores(0.9, trained=False).best == "prompts"


@pytest.mark.parametrize("kind", ["prompts", "prototypes", "blend"])
def test_a_head_is_saved_and_loaded_with_its_kind(kind, tmp_path):
    x, _, prompts = _misnamed_clusters()
    head = {"prompts": prompts, "prototypes": prompts.prototypes(x),
            "blend": prompts.blend(prompts.prototypes(x))}[kind]
    head.save(tmp_path)
    loaded = LabelHead.load(tmp_path)
    assert loaded.kind == kind
    np.testing.assert_array_equal(loaded.scores(x), head.scores(x))
