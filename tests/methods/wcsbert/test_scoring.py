import json

import numpy as np
import pytest

from contrastext.data.h5store import write_shard
from contrastext.methods.wcsbert.scoring import changed_share, scan_pool, score_pool
from contrastext.models import TextEncoder
from contrastext.zeroshot import ZeroShotClassifier

ATTRS = {"dimension": 32, "model": "tiny", "max_words": 200}


def _pool(path, embeddings, ids, rows_per_shard):
    shards = [write_shard(path, k, ids[s:s + rows_per_shard], embeddings[s:s + rows_per_shard], ATTRS)
              for k, s in enumerate(range(0, len(ids), rows_per_shard))]
    (path / "manifest.json").write_text(json.dumps({"attributes": ATTRS, "shards": shards}))


def test_streamed_scores_equal_the_classifier_on_the_whole_array(tmp_path, tiny_encoder_dir):
    encoder = TextEncoder.from_pretrained(tiny_encoder_dir, device="cpu")
    classifier = ZeroShotClassifier(encoder, template="News about {label}.")
    label_set = classifier.label_set(["World", "Sports", "Sci/Tech"], {"Sci/Tech": ["Science", "Technology"]})
    rng = np.random.default_rng(0)
    embeddings = rng.standard_normal((50, 32)).astype(np.float16)
    ids = np.arange(100, 150)
    _pool(tmp_path, embeddings, ids, rows_per_shard=20)
    pool = score_pool(tmp_path, encoder, label_set, "News about {label}.", chunk_rows=7)
    want_scores, want_alias = classifier.score_embeddings_with_aliases(embeddings.astype(np.float32), label_set)
    assert list(pool.ids) == list(ids)
    np.testing.assert_allclose(pool.scores, want_scores, atol=1e-6)
    np.testing.assert_array_equal(pool.alias, want_alias)
    # the same scan over one in-memory chunk
    aliases = classifier.alias_embeddings(label_set)
    whole = scan_pool([(ids, embeddings.astype(np.float32))], aliases, label_set.flat()[1], 3)
    np.testing.assert_allclose(whole.scores, pool.scores, atol=1e-6)


def test_an_empty_pool_is_an_error_and_label_change_is_a_share():
    with pytest.raises(ValueError, match="no embeddings"):
        scan_pool([], np.eye(2, dtype=np.float32), np.array([0, 1]), 2)
    assert changed_share(None, np.array([0, 1])) is None
    assert changed_share(np.array([0, 1, 1, 0]), np.array([0, 1, 0, 0])) == 0.25


def test_scan_holds_the_result_and_one_chunk_not_every_chunk_twice():
    """With the pool size known the scores are filled in place: peak memory is the result plus one chunk's
    work, where collecting chunk results and concatenating them needs twice the result."""
    import tracemalloc

    rng = np.random.default_rng(0)
    owner = np.array([0, 1, 2, 3, 3])
    aliases = rng.standard_normal((5, 16)).astype(np.float32)
    chunk_rows, n_chunks = 2_000, 50
    chunk = rng.standard_normal((chunk_rows, 16)).astype(np.float32)

    def chunks():
        for k in range(n_chunks):
            yield np.arange(k * chunk_rows, (k + 1) * chunk_rows), chunk

    rows = chunk_rows * n_chunks
    tracemalloc.start()
    try:
        pool = scan_pool(chunks(), aliases, owner, 4, rows=rows)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    result = pool.ids.nbytes + pool.scores.nbytes + pool.alias.nbytes
    assert pool.alias.dtype == np.uint8 and pool.scores.dtype == np.float32
    assert peak < result + 1_000_000, (peak, result)  # one chunk's work (about 0.3 MB), not a second copy
    np.testing.assert_array_equal(pool.ids, np.arange(rows))
    whole = scan_pool(chunks(), aliases, owner, 4)  # the unsized path gives the same scores
    np.testing.assert_array_equal(whole.scores, pool.scores)
    np.testing.assert_array_equal(whole.alias, pool.alias)
    with pytest.raises(ValueError, match="announced"):
        scan_pool(chunks(), aliases, owner, 4, rows=rows - 1)
    with pytest.raises(ValueError, match="announced"):
        scan_pool(chunks(), aliases, owner, 4, rows=rows + 1)
