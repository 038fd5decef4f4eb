"""Sharded .h5 store: shard plan, atomic shard files, the writer stage, streaming reads and id lookups."""

import json

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contrastext.data.h5store import (H5Corpus, ShardSpec, first_words, plan_shards, read_rows,
                                      remove_partial_files, shard_status, write_shard)

ATTRS = {"model": "m", "dimension": 4, "normalize": True, "pooling": "mean", "max_length": 16, "max_words": 5,
         "dtype": "float16"}


def _pages(path, ids, group=3):
    pq.write_table(pa.table({"page_id": pa.array(ids, pa.int64()), "text": [f"text {i}" for i in ids]}), path,
                   row_group_size=group)
    return str(path)


def test_plan_is_deterministic_and_rows_read_by_range(tmp_path):
    a = _pages(tmp_path / "a.parquet", list(range(10)))
    b = _pages(tmp_path / "b.parquet", list(range(100, 104)))
    specs = plan_shards([a, b], rows_per_shard=4)
    assert [(s.source, s.row_start, s.row_end) for s in specs] == [
        (a, 0, 4), (a, 4, 8), (a, 8, 10), (b, 0, 4)]
    assert [s.shard for s in specs] == [0, 1, 2, 3] and specs == plan_shards([a, b], rows_per_shard=4)
    assert read_rows(a, 4, 8, ["page_id"]).column("page_id").to_pylist() == [4, 5, 6, 7]  # spans row groups
    assert read_rows(a, 8, 10, ["text"]).column("text").to_pylist() == ["text 8", "text 9"]


def test_first_words():
    assert first_words("  one two\nthree   four five six ", 4) == "one two three four"
    assert first_words("short", 200) == "short"


def _corpus(tmp_path, rng):
    ids = rng.permutation(np.arange(1000, 1050))
    emb = rng.standard_normal((50, 4)).astype(np.float32)
    entries = [write_shard(tmp_path, k, ids[k * 20:(k + 1) * 20], emb[k * 20:(k + 1) * 20],
                           {**ATTRS, "source": "s", "row_start": k * 20, "row_end": (k + 1) * 20,
                            "expected_rows": len(ids[k * 20:(k + 1) * 20])}) for k in range(3)]
    (tmp_path / "manifest.json").write_text(json.dumps({"attributes": ATTRS, "shards": entries}))
    return ids, emb, entries


def test_shards_stream_in_chunks_and_lookup_by_id(tmp_path):
    ids, emb, entries = _corpus(tmp_path, np.random.default_rng(0))
    assert [e["rows"] for e in entries] == [20, 20, 10]
    with h5py.File(tmp_path / "shard-00000.h5") as h5:
        assert h5["ids"].dtype == np.int64 and h5["embeddings"].dtype == np.float16
        assert list(h5["ids"][:]) == sorted(ids[:20]) and h5.attrs["dimension"] == 4
    corpus = H5Corpus(tmp_path)
    assert len(corpus) == 50 and corpus.dimension == 4 and corpus.verify() == []
    chunks = list(corpus.iter_chunks(chunk_rows=7))
    assert max(len(c[0]) for c in chunks) == 7
    seen = np.concatenate([c[0] for c in chunks])
    assert sorted(seen.tolist()) == sorted(ids.tolist()) and len(set(seen.tolist())) == 50
    wanted = [ids[45], ids[3], ids[3], ids[21]]
    rows = [list(ids).index(i) for i in wanted]
    np.testing.assert_allclose(corpus.lookup(wanted), emb[rows], atol=2e-3)  # float16 storage
    with pytest.raises(KeyError, match="1 ids not in"):
        corpus.lookup([ids[0], 5])
    positions = np.array([0, 19, 20, 33, 49])  # across all three shards, in the streaming order
    assert corpus.ids_at(positions).tolist() == seen[positions].tolist()
    with pytest.raises(IndexError, match="outside"):
        corpus.ids_at([50])


def test_status_detects_missing_damaged_and_mismatched_shards(tmp_path):
    spec = ShardSpec(0, "s", 0, 20)
    _corpus(tmp_path, np.random.default_rng(1))
    good = {**ATTRS}
    assert shard_status(tmp_path, spec, good) == "complete"
    assert shard_status(tmp_path, ShardSpec(7, "s", 0, 20), good) == "missing"
    assert shard_status(tmp_path, spec, {**good, "max_words": 200}) == "mismatch"
    assert shard_status(tmp_path, spec, good, checksum="sha256:0") == "damaged"
    (tmp_path / "shard-00001.h5").write_bytes(b"not an hdf5 file")
    assert shard_status(tmp_path, ShardSpec(1, "s", 20, 40), good) == "damaged"
    (tmp_path / "shard-00002.h5.tmp-123").write_bytes(b"half")
    assert remove_partial_files(tmp_path) == ["shard-00002.h5.tmp-123"]
    assert H5Corpus(tmp_path).verify() == ["shard-00001.h5"]


def test_reader_needs_a_finished_output(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a finished encode_corpus output"):
        H5Corpus(tmp_path)
