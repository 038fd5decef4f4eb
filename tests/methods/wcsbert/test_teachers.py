"""Teachers of self-training: the prompt teacher keeps the prompt scores, the prototype teacher corrects
items the prompts mislabel when the pool's own clusters say otherwise."""

import numpy as np
import pytest

from contrastext.methods.wcsbert.prototypes import label_prototypes, prototype_scores
from contrastext.methods.wcsbert.teachers import PromptTeacher, PrototypeTeacher


def _pool():
    """Two tight clusters along x and y; label 1's prompt points between y and z, so the y-cluster items
    that lean towards x score label 0's prompt (x) higher: the prompts get 5 of 40 wrong."""
    rng = np.random.default_rng(0)
    a = np.array([1.0, 0.0, 0.0]) + 0.02 * rng.normal(size=(20, 3))
    b = np.array([0.0, 1.0, 0.0]) + 0.02 * rng.normal(size=(20, 3))
    b[:5, 0] += 0.8  # these lean towards label 0's prompt
    embeddings = np.vstack([a, b]).astype(np.float32)
    prompts = np.array([[1.0, 0.0, 0.0], [0.0, 0.6, 0.8]], dtype=np.float32)
    units = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    return embeddings, units @ prompts.T, prompts, np.repeat([0, 1], 20)


def test_prompt_teacher_returns_the_prompt_scores():
    embeddings, prompt_scores, prompts, _ = _pool()
    assert PromptTeacher().scores(embeddings, prompt_scores, prompts) is prompt_scores


def test_prototype_teacher_scores_by_the_confident_items_mean_and_fixes_what_prompts_got_wrong():
    embeddings, prompt_scores, prompts, truth = _pool()
    prompt_right = float(np.mean(prompt_scores.argmax(axis=1) == truth))
    scores = PrototypeTeacher(fraction=0.5).scores(embeddings, prompt_scores, prompts)
    expected = prototype_scores(embeddings, label_prototypes(embeddings, prompt_scores, 0.5, fallback=prompts))
    np.testing.assert_allclose(scores, expected, atol=1e-6)
    assert prompt_right == 35 / 40
    assert float(np.mean(scores.argmax(axis=1) == truth)) == 1.0


def test_prototype_teacher_chunks_give_the_array_result():
    embeddings, prompt_scores, prompts, _ = _pool()
    teacher = PrototypeTeacher(fraction=0.5, iterations=3)
    whole = teacher.scores(embeddings, prompt_scores, prompts)
    chunks = [embeddings[:15], embeddings[15:31], embeddings[31:]]
    np.testing.assert_allclose(teacher.scores(chunks, prompt_scores, prompts), whole, atol=1e-6)


def test_prototype_teacher_settings_are_checked():
    with pytest.raises(ValueError):
        PrototypeTeacher(fraction=0)
