from __future__ import annotations

import numpy as np
import pytest

from contrastext.methods.wcsbert.pseudo_labels import SelectionConfig, confidences, select


def test_margin_and_similarity_confidence():
    scores = np.array([[0.9, 0.5, 0.1], [0.4, 0.45, 0.0]])
    assert np.allclose(confidences(scores, "margin"), [0.4, 0.05])
    assert np.allclose(confidences(scores, "similarity"), [0.9, 0.45])


def test_threshold_fraction_and_caps():
    rng = np.random.default_rng(0)
    scores = rng.uniform(0, 1, size=(200, 3)).astype(np.float32)
    out = select(scores, SelectionConfig(threshold=None, top_fraction=0.5, max_label_ratio=None))
    for label in range(3):
        members = np.flatnonzero(out.label == label)
        kept = np.intersect1d(out.kept, members)
        assert len(kept) == len(members) // 2
        # the kept ones are the most confident of their label
        assert out.confidence[kept].min() >= np.median(out.confidence[members]) - 1e-6
    high = select(scores, SelectionConfig(threshold=0.9, top_fraction=None, max_label_ratio=None))
    assert (out.score[high.kept] >= 0.9).all()
    assert len(high.kept) == int((scores.max(axis=1) >= 0.9).sum())
    capped = select(scores, SelectionConfig(top_fraction=None, max_per_label=7, max_label_ratio=None))
    assert capped.kept_per_label(3).max() == 7


def test_label_ratio_balances_a_dominant_label():
    scores = np.zeros((100, 2), dtype=np.float32)
    scores[:90, 0] = 1.0  # 90 rows of label 0
    scores[90:, 1] = 1.0  # 10 rows of label 1
    out = select(scores, SelectionConfig(top_fraction=None, max_label_ratio=2.0, balance_to="smallest"))
    assert out.kept_per_label(2).tolist() == [20, 10]
    assert out.kept.tolist() == sorted(out.kept.tolist())


def skewed_scores(sizes: list[int]) -> np.ndarray:
    """One row per item, its label's column 1 and the others 0: ``sizes[i]`` rows of label i."""
    labels = np.repeat(np.arange(len(sizes)), sizes)
    scores = np.zeros((len(labels), len(sizes)), dtype=np.float32)
    scores[np.arange(len(labels)), labels] = 1.0
    return scores


def test_a_skewed_pool_keeps_its_frequent_labels_and_every_rare_item():
    sizes = [980, 400, 250, 150, 100, 60, 50, 10]  # the largest label 49% of the pool, the smallest 0.5%
    scores = skewed_scores(sizes)
    by_median = select(scores, SelectionConfig(top_fraction=None, max_label_ratio=2.0)).kept_per_label(8)
    by_smallest = select(scores, SelectionConfig(top_fraction=None, max_label_ratio=2.0,
                                                 balance_to="smallest")).kept_per_label(8)
    assert by_smallest.tolist() == [20, 20, 20, 20, 20, 20, 20, 10]  # every label as thin as the rarest
    assert by_median.tolist() == [250, 250, 250, 150, 100, 60, 50, 10]  # 2 × the median label (125)
    assert by_median.sum() > 6 * by_smallest.sum()


@pytest.mark.parametrize("bad", [{"top_fraction": 0}, {"threshold": 2}, {"max_label_ratio": 0.5}])
def test_bad_settings_are_rejected(bad):
    with pytest.raises(ValueError):
        SelectionConfig(**bad)


def test_label_prototypes_are_the_confident_members_means():
    from contrastext.methods.wcsbert.prototypes import classify_by_prototypes, label_prototypes

    rng = np.random.default_rng(1)
    centres = np.eye(3, 8, dtype=np.float32)
    labels = np.repeat(np.arange(3), 20)
    embeddings = centres[labels] + 0.05 * rng.standard_normal((60, 8)).astype(np.float32)
    scores = embeddings[:, :3] + 0.01  # the pseudo-labels follow the first three axes
    prototypes = label_prototypes(embeddings, scores, fraction=0.5)
    assert prototypes.shape == (3, 8) and np.allclose(np.linalg.norm(prototypes, axis=1), 1, atol=1e-5)
    assert (prototypes.argmax(axis=1) == np.arange(3)).all()
    assert (classify_by_prototypes(embeddings, prototypes) == labels).all()
    with pytest.raises(ValueError, match="no pool item is labelled 2"):
        label_prototypes(embeddings[:40], scores[:40])
    fallback = np.eye(3, 8, k=5, dtype=np.float32)
    filled = label_prototypes(embeddings[:40], scores[:40], fallback=fallback)
    assert np.allclose(filled[2], fallback[2]) and filled[0].argmax() == 0



def test_best_labels_in_chunks_match_the_whole_matrix_and_use_a_small_label_type():
    from contrastext.methods.wcsbert.pseudo_labels import best_labels, confidences

    scores = np.random.default_rng(3).normal(size=(1003, 5)).astype(np.float32)
    for kind in ("margin", "similarity"):
        label, best, confidence = best_labels(scores, kind, chunk_rows=100)
        np.testing.assert_array_equal(label, scores.argmax(axis=1))
        np.testing.assert_array_equal(best, scores.max(axis=1))
        np.testing.assert_array_equal(confidence, confidences(scores, kind))
        assert label.dtype == np.int16 and best.dtype == np.float32


def test_select_holds_no_pool_sized_int64_or_copy_of_the_scores():
    import tracemalloc

    from contrastext.methods.wcsbert.pseudo_labels import SelectionConfig, select

    n, labels = 400_000, 4
    scores = np.random.default_rng(0).random((n, labels), dtype=np.float32)
    tracemalloc.start()
    pseudo = select(scores, SelectionConfig(max_label_ratio=None))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # measured 32 bytes a row (kept, label, score, confidence and one label's sort temporaries); the whole-pool
    # argmax (int64), arange index and per-label views of every sorted row list came to 40
    assert peak < 36 * n, peak / n
    assert len(pseudo.kept) == sum(int(np.count_nonzero(pseudo.label == k)) // 2 for k in range(labels))
