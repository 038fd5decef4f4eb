from __future__ import annotations

import numpy as np

from contrastext.evaluators.category_retrieval import CategoryRetrievalEvaluator, average_precision_at_k, first_words


def test_average_precision_at_k_follows_the_ir_definition():
    assert average_precision_at_k([1, 2, 3], {1, 2, 3}, 3) == 1.0
    assert average_precision_at_k([9, 1, 8], {1, 2, 3}, 3) == (1 / 2) / 3
    assert average_precision_at_k([1, 9, 2], {1, 2}, 3) == (1 + 2 / 3) / 2
    assert average_precision_at_k([9, 8, 7], {1}, 3) == 0.0


def test_first_words():
    assert first_words("a  b\nc d", 3) == "a b c"


class BagEncoder:
    def __init__(self, vocabulary):
        self.vocabulary = vocabulary

    def encode(self, texts, batch_size=64):
        out = np.full((len(texts), len(self.vocabulary)), 1e-3, dtype=np.float32)
        for i, t in enumerate(texts):
            for j, w in enumerate(self.vocabulary):
                out[i, j] += t.lower().count(w)
        return out


def test_perfect_and_imperfect_retrieval():
    vocab = ["river", "city", "music", "war"]
    evaluator = CategoryRetrievalEvaluator(
        queries=["a river city with music", "war music"],
        query_categories=[["Rivers", "Cities", "Music scenes"], ["Wars", "Music", "Cities"]],
        categories=["Rivers", "Cities", "Music scenes", "Wars", "Music"], k=3)
    metrics = evaluator(BagEncoder(vocab))
    assert 0 < metrics["map@3"] <= 1 and 0 < metrics["recall@3"] <= 1
    assert metrics["map@3"] < 1.0  # "Cities" is not in the second query's words
    assert CategoryRetrievalEvaluator([], [], ["x"])(BagEncoder(vocab)) == {}
