"""The heads a WC-SBERT model can be delivered with: its label prompts, or the prototypes of its own labels;
the guard scores both, the prompts' score chooses the round and the prototypes are delivered only where they
score clearly better; a head is saved and loaded with its kind."""

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


@pytest.mark.parametrize("kind", ["prompts", "prototypes"])
def test_a_head_is_saved_and_loaded_with_its_kind(kind, tmp_path):
    x, _, prompts = _misnamed_clusters()
    head = prompts if kind == "prompts" else prompts.prototypes(x)
    head.save(tmp_path)
    loaded = LabelHead.load(tmp_path)
    assert loaded.kind == kind
    np.testing.assert_array_equal(loaded.scores(x), head.scores(x))
