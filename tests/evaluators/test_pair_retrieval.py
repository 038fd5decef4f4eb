"""PairRetrievalEvaluator: pure metric tests with fixed vectors standing in for a model."""

from __future__ import annotations

import numpy as np
import pytest

from contrastext.evaluators import PairRetrievalEvaluator


class FixedEncoder:
    """Returns a fixed vector per text and records what it was asked to encode."""

    def __init__(self, vectors: dict[str, list[float]]):
        self.vectors = {text: np.asarray(v, dtype=np.float32) for text, v in vectors.items()}
        self.calls: list[tuple[list[str], int]] = []

    def encode(self, texts, batch_size):
        texts = list(texts)
        self.calls.append((texts, batch_size))
        return np.stack([self.vectors[t] for t in texts])


def _one_hot(i: int, dim: int = 7) -> list[float]:
    v = [0.0] * dim
    v[i] = 1.0
    return v


# Candidates c0..c6 are orthonormal, so an anchor's cosine with c_j orders like its j-th component.
# Ranks count a tie with another candidate against the anchor (a collapsed model must not score well).
ANCHORS = {
    #       vector                        target  greater  tied  rank
    "a0": ([5, 1, 1, 1, 1, 1, 1], "c0"),  # 0        0     1
    "a1": ([3, 2, 1, 0, 0, 0, 0], "c1"),  # 1        0     2
    "a2": ([2, 2, 1, 2, 2, 2, 2], "c2"),  # 6        0     7
    "a3": ([5, 5, 5, 1, 5, 5, 0], "c3"),  # 5        0     6
    "a4": ([5, 5, 5, 5, 1, 0, 0], "c4"),  # 4        0     5
    "a5": ([0, 0, 0, 0, 0, 3, 0], "c5"),  # 0        0     1
    "a6": ([0, 0, 0, 0, 0, 1, 1], "c6"),  # 0        1     2   (tie at the top)
    "a7": ([1, 1, 1, 1, 1, 2, 0], "c0"),  # 1        4     6   (c0 repeated; ties with c1..c4)
}
EXPECTED_RANKS = [1, 2, 7, 6, 5, 1, 2, 6]


def _example():
    vectors = {name: vec for name, (vec, _) in ANCHORS.items()}
    vectors.update({f"c{i}": _one_hot(i) for i in range(7)})
    encoder = FixedEncoder(vectors)
    evaluator = PairRetrievalEvaluator(anchors=list(ANCHORS), positives=[t for _, t in ANCHORS.values()],
                                       batch_size=3)
    return evaluator, encoder


def test_hand_computed_example_with_ties_and_a_repeated_positive():
    evaluator, encoder = _example()
    metrics = evaluator(encoder)
    assert set(metrics) == {"acc@1", "acc@5", "mrr"}
    ranks = np.array(EXPECTED_RANKS)
    assert metrics["acc@1"] == pytest.approx(2 / 8)
    assert metrics["acc@5"] == pytest.approx(5 / 8)
    assert metrics["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 7 + 1 / 6 + 1 / 5 + 1 + 1 / 2 + 1 / 6) / 8)
    assert metrics["mrr"] == pytest.approx(float((1 / ranks).mean()))
    assert all(isinstance(v, float) for v in metrics.values())


def test_repeated_positives_are_encoded_once_as_candidates():
    evaluator, encoder = _example()
    evaluator(encoder)
    anchors_call, candidates_call = encoder.calls
    assert anchors_call == (list(ANCHORS), 3)
    assert candidates_call == ([f"c{i}" for i in range(7)], 3)  # distinct and sorted, "c0" once


def test_scale_of_the_vectors_does_not_matter():
    evaluator, encoder = _example()
    expected = evaluator(encoder)
    encoder.vectors = {t: v * (10.0 if t.startswith("a") else 0.01) for t, v in encoder.vectors.items()}
    assert evaluator(encoder) == pytest.approx(expected)


def test_a_repeated_positive_string_is_one_candidate_not_a_competitor():
    # both anchors want "same"; if "same" were listed twice its copy would tie with it and cost a rank
    encoder = FixedEncoder({"x": [1, 0], "y": [1, 0.1], "same": [1, 0], "other": [0, 1]})
    metrics = PairRetrievalEvaluator(["x", "y", "x"], ["same", "same", "other"])(encoder)
    # ranks: x→same 1, y→same 1, x→other 2
    assert metrics == pytest.approx({"acc@1": 2 / 3, "acc@5": 1.0, "mrr": (1 + 1 + 1 / 2) / 3})


def test_a_collapsed_encoder_gets_no_credit():
    # every text gets the same vector: every candidate ties, so nothing is retrieved at rank 1
    texts = [f"t{i}" for i in range(10)]
    encoder = FixedEncoder({t: [0.3, -0.2, 0.9] for t in texts + [f"p{i}" for i in range(10)]})
    metrics = PairRetrievalEvaluator(texts, [f"p{i}" for i in range(10)])(encoder)
    assert metrics["acc@1"] == 0.0
    assert metrics["acc@5"] == 0.0
    assert metrics["mrr"] == pytest.approx(1 / 10)


def test_non_finite_embeddings_get_the_worst_rank():
    # a diverged model (NaN vectors) must not look perfect, nor give an infinite MRR
    encoder = FixedEncoder({"a0": [float("nan"), 0, 0], "a1": [0, 1, 0], "a2": [0, 0, 1],
                            "p0": [1, 0, 0], "p1": [0, 1, 0], "p2": [0, 0, 1]})
    metrics = PairRetrievalEvaluator(["a0", "a1", "a2"], ["p0", "p1", "p2"])(encoder)
    # ranks: a0 → 3 (worst of three candidates), a1 → 1, a2 → 1
    assert metrics == pytest.approx({"acc@1": 2 / 3, "acc@5": 1.0, "mrr": (1 / 3 + 1 + 1) / 3})


def test_a_perfect_encoder_scores_one():
    encoder = FixedEncoder({**{f"a{i}": _one_hot(i, 6) for i in range(6)},
                            **{f"p{i}": _one_hot(i, 6) for i in range(6)}})
    metrics = PairRetrievalEvaluator([f"a{i}" for i in range(6)], [f"p{i}" for i in range(6)])(encoder)
    assert metrics == {"acc@1": 1.0, "acc@5": 1.0, "mrr": 1.0}


def test_empty_evaluation_set_returns_empty_dict_without_encoding():
    encoder = FixedEncoder({})
    assert PairRetrievalEvaluator([], [])(encoder) == {}
    assert encoder.calls == []
