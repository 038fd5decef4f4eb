"""Label-prior calibration: one label winning most argmaxes loses them to the labels the items belong to."""

import numpy as np
import pytest
from pydantic import ValidationError
from scipy.special import log_softmax

from contrastext.methods.wcsbert.calibration import CalibrationConfig, argmax_counts, calibrate, prior_shift
from contrastext.methods.wcsbert.pseudo_labels import SelectionConfig, select
from contrastext.methods.wcsbert.pseudo_pairs import text_pairs
from contrastext.zeroshot import LabelSet

ON = CalibrationConfig(enabled=True, temperature=0.05)


def _swallowed_pool(per_group: int = 150, close: int = 110) -> tuple[np.ndarray, np.ndarray]:
    """[4 × per_group, 4] scores and each row's true group: label 0 wins its own rows clearly and, by 0.01,
    ``close`` rows of every other group (80% of the argmaxes with the defaults)."""
    rows, groups = [], []
    for group in range(4):
        for i in range(per_group):
            row = np.full(4, 0.4, dtype=np.float32)
            row[group] = 0.6
            if group and i < close:
                row[group], row[0] = 0.52, 0.53
            rows.append(row)
            groups.append(group)
    return np.stack(rows), np.array(groups)


def test_one_label_that_swallows_the_pool_gives_its_rows_back():
    scores, groups = _swallowed_pool()
    before = argmax_counts(scores)
    assert before.tolist() == [480, 40, 40, 40]  # label 0 wins 80% of the argmaxes
    calibrated = calibrate(scores, ON)
    after = argmax_counts(calibrated.scores)
    assert after.tolist() == [150, 150, 150, 150]
    assert np.array_equal(calibrated.scores.argmax(axis=1), groups)
    assert calibrated.shares.tolist() == [0.8, 40 / 600, 40 / 600, 40 / 600]
    smoothed = np.array([481, 41, 41, 41]) / 604
    np.testing.assert_allclose(calibrated.shift, 0.05 * np.log(4 * smoothed), rtol=1e-12)
    np.testing.assert_allclose(calibrated.scores, scores - calibrated.shift.astype(np.float32), atol=1e-7)
    assert calibrated.scores.dtype == np.float32 and calibrated.scores is not scores


def test_off_by_default_the_scores_are_the_teachers():
    scores, _ = _swallowed_pool()
    assert CalibrationConfig().enabled is False
    kept = calibrate(scores, CalibrationConfig())
    assert kept.scores is scores and kept.shift.tolist() == [0.0] * 4
    assert argmax_counts(kept.scores).tolist() == [480, 40, 40, 40]


def test_the_correction_is_the_prior_ratio_rule_on_softmax_probabilities():
    """temperature · log(p · (1/K) / π), renormalised, differs from the calibrated scores by a constant per row."""
    rng = np.random.default_rng(0)
    scores = (rng.standard_normal((300, 5)) * 0.05 + np.array([0.05, 0, 0, 0, -0.03])).astype(np.float32)
    temperature = 0.04
    calibrated = calibrate(scores, CalibrationConfig(enabled=True, temperature=temperature))
    counts = argmax_counts(scores)
    prior = (counts + 1) / (counts.sum() + 5)
    log_p = log_softmax(scores.astype(np.float64) / temperature, axis=1) + np.log(1 / 5) - np.log(prior)
    log_p -= np.logaddexp.reduce(log_p, axis=1, keepdims=True)
    difference = temperature * log_p - calibrated.scores
    np.testing.assert_allclose(difference, difference[:, :1].repeat(5, axis=1), atol=1e-5)
    assert np.array_equal(log_p.argmax(axis=1), calibrated.scores.argmax(axis=1))


def test_a_label_at_its_fair_share_keeps_its_scores_and_an_empty_label_is_raised_finitely():
    balanced = np.eye(3, dtype=np.float32).repeat(4, axis=0)
    result = calibrate(balanced, ON)
    np.testing.assert_array_equal(result.scores, balanced)
    shift = prior_shift(np.array([10, 0]), 0.05)
    assert np.isfinite(shift).all()
    np.testing.assert_allclose(shift, 0.05 * np.log(2 * np.array([11, 1]) / 12))


def test_more_iterations_balance_further():
    """Each iteration counts the shares again on the corrected scores: the argmaxes approach a balanced pool."""
    rng = np.random.default_rng(1)
    scores = (rng.standard_normal((2000, 4)) * 0.03 + np.array([0.06, 0.0, 0.0, -0.02])).astype(np.float32)
    assert argmax_counts(scores).tolist() == [1714, 115, 132, 39]
    counts = {n: argmax_counts(calibrate(scores, CalibrationConfig(enabled=True, temperature=0.02,
                                                                   iterations=n)).scores).tolist()
              for n in (1, 2, 3)}
    assert counts == {1: [630, 456, 437, 477], 2: [513, 487, 503, 497], 3: [502, 493, 503, 502]}


def test_calibration_changes_what_is_trained():
    """Selection with its own balance cap keeps label 0's clear rows only; calibrated, every group trains
    under its own label, each with the share the selection allows."""
    scores, groups = _swallowed_pool()
    texts = [f"text {i}" for i in range(len(scores))]
    label_set = LabelSet(("a", "b", "c", "d"), (("a",), ("b",), ("c",), ("d",)))
    selection = SelectionConfig()  # top half by margin per label, no label over twice the smallest
    alias = np.zeros(scores.shape, dtype=np.int64)  # one string per label
    plain = select(scores, selection, alias)
    calibrated = select(calibrate(scores, ON).scores, selection, alias)
    plain_pairs = text_pairs(texts, plain, label_set, "{label}")
    calibrated_pairs = text_pairs(texts, calibrated, label_set, "{label}")
    assert plain_pairs.per_label(4).tolist() == [40, 20, 20, 20]
    assert calibrated_pairs.per_label(4).tolist() == [75, 75, 75, 75]
    trained = {(text, positive) for text, positive in zip(calibrated_pairs.anchors, calibrated_pairs.positives)}
    assert trained == {(texts[i], "abcd"[groups[i]]) for i in calibrated.kept}


def test_settings_are_checked():
    with pytest.raises(ValidationError, match="temperature"):
        CalibrationConfig(enabled=True, temperature=0)
    with pytest.raises(ValidationError, match="iterations"):
        CalibrationConfig(iterations=0)
    with pytest.raises(ValidationError, match="extra"):
        CalibrationConfig(strength=1)
