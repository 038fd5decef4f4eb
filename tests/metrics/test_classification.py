"""Classification metrics against hand-computed values and scikit-learn's definitions."""

import numpy as np
import pytest

from contrastext.metrics.classification import (
    accuracy,
    auprc_per_class,
    classification_report,
    embedding_silhouette,
    macro_f1,
    micro_f1,
)

# label 2 plays the null label ("no relation")
Y_TRUE = [0, 0, 1, 1, 2, 2, 2, 2]
Y_PRED = [0, 1, 1, 2, 2, 2, 0, 2]


def test_accuracy():
    assert accuracy(Y_TRUE, Y_PRED) == pytest.approx(5 / 8)


def test_micro_f1_leaves_the_null_label_out():
    # non-null predictions: rows 0, 1, 2, 6 -> correct: rows 0, 2 -> precision 2/4
    # non-null gold rows: 0, 1, 2, 3 -> correct: rows 0, 2 -> recall 2/4
    assert micro_f1(Y_TRUE, Y_PRED, num_labels=3, null_label=2) == pytest.approx(0.5)
    assert micro_f1(Y_TRUE, Y_PRED, num_labels=3) == pytest.approx(accuracy(Y_TRUE, Y_PRED))


def test_macro_f1_is_the_mean_over_present_labels():
    f1 = {0: 2 * 0.5 * 0.5 / 1.0, 1: 2 * 0.5 * 0.5 / 1.0, 2: 2 * 0.75 * 0.75 / 1.5}
    assert macro_f1(Y_TRUE, Y_PRED, num_labels=3) == pytest.approx(np.mean(list(f1.values())))
    # a label absent from the gold rows does not drag the mean to zero
    assert macro_f1([0, 1], [0, 1], num_labels=5) == pytest.approx(1.0)


def test_auprc_perfect_ranking_is_one_and_inverted_is_low():
    y = np.array([0, 0, 1, 1, 2])
    perfect = np.eye(3)[y] * 0.9 + 0.05
    assert auprc_per_class(y, perfect) == {0: pytest.approx(1.0), 1: pytest.approx(1.0), 2: pytest.approx(1.0)}
    inverted = 1 - perfect
    scores = auprc_per_class(y, inverted)
    assert scores[2] == pytest.approx(0.2) and scores[0] < 0.5


def test_auprc_skips_labels_without_rows():
    probs = np.full((3, 4), 0.25)
    assert set(auprc_per_class([0, 1, 1], probs)) == {0, 1}


def test_silhouette_separated_vs_mixed():
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2], 30)
    centres = np.eye(3, 16) * 10
    separated = centres[labels] + rng.normal(scale=0.1, size=(90, 16))
    mixed = rng.normal(size=(90, 16))
    assert embedding_silhouette(separated, labels) > 0.9
    assert abs(embedding_silhouette(mixed, labels)) < 0.1
    assert embedding_silhouette(separated, np.zeros(90, dtype=int)) is None
    sampled = embedding_silhouette(separated, labels, max_rows=40)
    assert sampled > 0.9


def test_report_collects_everything_with_names():
    probs = np.eye(3)[Y_PRED] * 0.8 + 0.1 / 3
    embeddings = np.eye(3, 8)[Y_TRUE] + 0.01
    report = classification_report(Y_TRUE, probs, embeddings, ["a", "b", "none"], null_label=2)
    assert report.rows == 8 and report.null_label == "none"
    assert report.accuracy == pytest.approx(5 / 8) and report.micro_f1 == pytest.approx(0.5)
    assert set(report.per_class_auprc) == set(report.per_class_f1) == {"a", "b", "none"}
    assert report.auprc == pytest.approx(np.mean(list(report.per_class_auprc.values())))
    assert report.silhouette > 0.9
    assert report.as_dict()["macro_f1"] == pytest.approx(report.macro_f1)


@pytest.mark.parametrize("call", [
    lambda: accuracy([0, 1], [0]),
    lambda: accuracy([], []),
    lambda: micro_f1([[0, 1]], [[0, 1]], 2),
    lambda: auprc_per_class([0, 1], np.zeros(2)),
    lambda: classification_report([0, 1], np.zeros((2, 3)), None, ["a", "b"]),
])
def test_bad_input_is_an_error(call):
    with pytest.raises(ValueError):
        call()
