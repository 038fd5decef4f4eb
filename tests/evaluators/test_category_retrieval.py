from __future__ import annotations

import zlib

import numpy as np
import pytest

from contrastext.evaluators.category_retrieval import (
    CategoryRetrievalEvaluator,
    average_precision_at_k,
    first_words,
    top_k,
)


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
    # the first query finds its three categories; the second ranks "Music scenes" first and misses "Cities"
    # ("war music" has no city word): AP 1 and (1/2 + 2/3) / 3, recall 1 and 2/3
    assert metrics["map@3"] == pytest.approx((1 + 7 / 18) / 2)
    assert metrics["recall@3"] == pytest.approx((1 + 2 / 3) / 2)
    assert CategoryRetrievalEvaluator([], [], ["x"])(BagEncoder(vocab)) == {}


def _old_top(queries, corpus, k):
    """The scorer as it was: the full score matrix, fully sorted."""
    return np.argsort(-(queries @ corpus.T), axis=1, kind="stable")[:, :k]


def _chunks(corpus, size):
    return (corpus[s:s + size] for s in range(0, len(corpus), size))


def _unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_chunked_top_k_equals_the_full_sort_on_random_data():
    rng = np.random.default_rng(0)
    queries, corpus = _unit(rng.standard_normal((300, 24))), _unit(rng.standard_normal((2_000, 24)))
    for k in (1, 3, 10):
        want = _old_top(queries, corpus, k)
        for chunk, query_batch in ((2_000, 1_024), (37, 64), (500, 300), (3_000, 1)):
            np.testing.assert_array_equal(top_k(queries, _chunks(corpus, chunk), k, query_batch=query_batch), want)
        np.testing.assert_array_equal(top_k(queries, _chunks(corpus[:150], 1), k, query_batch=7),
                                      _old_top(queries, corpus[:150], k))
    # fewer categories than k: every one, ranked
    np.testing.assert_array_equal(top_k(queries, _chunks(corpus[:2], 1), 3), _old_top(queries, corpus[:2], 3))


def test_ties_go_to_the_category_listed_first_across_chunks():
    # integer vectors: equal scores are exactly equal, and many straddle the chunk and k boundaries
    rng = np.random.default_rng(1)
    queries = rng.integers(0, 2, (50, 4)).astype(np.float32)
    corpus = rng.integers(0, 2, (400, 4)).astype(np.float32)
    for chunk in (1, 3, 64, 400):
        np.testing.assert_array_equal(top_k(queries, _chunks(corpus, chunk), 5, query_batch=16),
                                      _old_top(queries, corpus, 5))


def _reference_metrics(evaluator, encoder):
    """MAP@k and recall@k exactly as the evaluator computed them before it was chunked."""
    categories = list(dict.fromkeys([*evaluator.categories, *(c for cs in evaluator.query_categories for c in cs)]))
    index = {c: i for i, c in enumerate(categories)}
    q = _unit(encoder.encode(list(evaluator.queries)))
    c = _unit(encoder.encode(categories))
    top = _old_top(q, c, evaluator.k)
    ap, recall = [], []
    for row, cats in zip(top, evaluator.query_categories):
        relevant = {index[x] for x in cats}
        ap.append(average_precision_at_k(list(row), relevant, evaluator.k))
        recall.append(len(relevant & set(row.tolist())) / len(relevant))
    return {f"map@{evaluator.k}": float(np.mean(ap)), f"recall@{evaluator.k}": float(np.mean(recall))}


class TableEncoder:
    """Each string's vector from a table, else a fixed random one (independent of the batch it is in)."""

    def __init__(self, table=None, dimension=16, calls=None):
        self.table, self.dimension, self.calls = table or {}, dimension, calls

    def _vector(self, text):
        if text in self.table:
            return self.table[text]
        return np.random.default_rng(zlib.crc32(text.encode())).standard_normal(self.dimension)

    def encode(self, texts, batch_size=64):
        if self.calls is not None:
            self.calls.append(len(texts))
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        return np.stack([self._vector(t) for t in texts]).astype(np.float32)


def _random_task(n_queries, n_categories, seed=0, dimension=16):
    """Queries near the mean of their 3 categories, so that retrieval is good but not perfect."""
    rng = np.random.default_rng(seed)
    categories = [f"category {i}" for i in range(n_categories)]
    vectors = rng.standard_normal((n_categories, dimension))
    picks = [rng.choice(n_categories, 3, replace=False) for _ in range(n_queries)]
    queries = [f"page {i}" for i in range(n_queries)]
    table = {c: v for c, v in zip(categories, vectors)}
    table |= {q: vectors[p].mean(0) + 0.3 * rng.standard_normal(dimension) for q, p in zip(queries, picks)}
    return queries, [[categories[j] for j in p] for p in picks], categories, table


def test_metrics_equal_the_whole_matrix_computation():
    queries, query_categories, categories, table = _random_task(120, 900)
    # the bag-of-words encoder gives many categories equal scores: ties decide much of its ranking
    for encoder in (TableEncoder(table), BagEncoder([f"{d}" for d in range(10)])):
        for k in (1, 3, 5):
            want = _reference_metrics(CategoryRetrievalEvaluator(queries, query_categories, categories, k=k), encoder)
            if isinstance(encoder, TableEncoder):
                assert 0 < want[f"map@{k}"] < 1
            for chunk_size, query_batch in ((16_384, 1_024), (100, 32), (7, 5)):
                got = CategoryRetrievalEvaluator(queries, query_categories, categories, k=k, chunk_size=chunk_size,
                                                 query_batch=query_batch)(encoder)
                assert got == want


def test_no_score_block_spans_every_category(monkeypatch):
    from contrastext.evaluators import category_retrieval

    shapes = []
    real = category_retrieval._score_block

    def spy(queries, chunk):
        block = real(queries, chunk)
        shapes.append(block.shape)
        return block

    monkeypatch.setattr(category_retrieval, "_score_block", spy)
    calls = []
    queries, query_categories, categories, table = _random_task(40, 1_000)
    CategoryRetrievalEvaluator(queries, query_categories, categories, chunk_size=64, query_batch=16)(
        TableEncoder(table, calls=calls))
    assert shapes and max(rows for rows, _ in shapes) <= 16 and max(cols for _, cols in shapes) <= 64
    assert sum(cols for _, cols in shapes) == 1_000 * len(range(0, 40, 16))  # every category scored, once per batch
    assert calls[0] == 40 and max(calls[1:]) <= 64 and sum(calls[1:]) == 1_000  # categories encoded chunk by chunk


def test_memory_does_not_grow_with_the_number_of_categories():
    import tracemalloc

    def peak(n_categories):
        queries, query_categories, categories, table = _random_task(200, n_categories, seed=3, dimension=64)
        evaluator = CategoryRetrievalEvaluator(queries, query_categories, categories, chunk_size=500, query_batch=100)
        encoder = TableEncoder(table, dimension=64)
        tracemalloc.start()
        try:
            evaluator(encoder)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(2_000), peak(20_000)
    # the whole-matrix scorer held 20,000 × 64 embeddings and 200 × 20,000 scores (over 10 MB) at once
    assert large < 1.5 * small + 256 * 1024, (small, large)


def test_categories_read_from_parquet_give_the_same_metrics_and_are_never_held(tmp_path):
    """The corpus job's category file read a chunk at a time: same metrics as the list, and the evaluator
    (pickled to the training workers as eval_fn) carries the file's location, not the categories."""
    import pickle

    import pyarrow as pa
    import pyarrow.parquet as pq

    queries, query_categories, categories, table = _random_task(60, 3_000)
    listed = categories[:-40]  # the last 40 are missing from the list and the file: relevant ones get appended
    path = tmp_path / "category_counts.parquet"
    pq.write_table(pa.table({"category": listed, "pages": [1] * len(listed)}), path)
    encoder = TableEncoder(table)
    for chunk_size in (16_384, 128, 7):
        want = CategoryRetrievalEvaluator(queries, query_categories, listed, chunk_size=chunk_size)(encoder)
        location = path if chunk_size == 7 else str(path)  # a Path or a string
        from_file = CategoryRetrievalEvaluator(queries, query_categories, location, chunk_size=chunk_size)
        assert from_file(encoder) == want
    assert want["map@3"] > 0.05  # chance is about 0.001 among 3,000 categories
    small = CategoryRetrievalEvaluator(queries, query_categories, str(path))
    assert len(pickle.dumps(small)) < 20_000 < len(pickle.dumps(CategoryRetrievalEvaluator(queries, query_categories,
                                                                                         listed)))
