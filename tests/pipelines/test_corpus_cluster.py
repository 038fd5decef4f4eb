"""encode_corpus on a cluster of several nodes loses one mid-run and still writes one row per page."""

import numpy as np
import pyarrow as pa
import pytest

from contrastext import storage
from contrastext.config import EncoderConfig, OutputConfig, ScalingSettings
from contrastext.data.h5store import H5Corpus
from contrastext.data.pages import PAGE_SCHEMA
from contrastext.pipelines.corpus import EncodeCorpusConfig, run_encode_corpus

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.multinode]


def test_encode_corpus_finishes_after_losing_a_node(fresh_cluster, s3_bucket, tiny_encoder_dir):
    rng = np.random.default_rng(3)
    ids = rng.permutation(np.arange(1, 2401)).tolist()
    words = "rivers mountains towns wizards boxing judges foxes dogs bridges markets".split()
    pages = s3_bucket + "/pages/part-00000.parquet"
    storage.write_parquet(pa.table({
        "page_id": pa.array(ids, pa.int64()), "title": [f"P{i}" for i in ids],
        "text": [" ".join(rng.choice(words, size=int(rng.integers(20, 120)))) for _ in ids],
        "categories": [["A", "B"]] * len(ids)}, schema=PAGE_SCHEMA), pages, row_group_size=100)
    model = storage.copy_tree(tiny_encoder_dir, s3_bucket + "/models/tiny")  # no worker reads the driver's disk
    run_dir = s3_bucket + "/runs/emb"
    config = EncodeCorpusConfig(pages=pages, encoder=EncoderConfig(model=model, max_length=64), max_words=100,
                                rows_per_shard=50, batch_size=16, output=OutputConfig(storage_path=s3_bucket + "/runs",
                                                                                      name="emb"),
                                scaling=ScalingSettings(num_workers=2, cpus_per_worker=1))
    killer = fresh_cluster.remove_worker_once(lambda: len(storage.list_files(run_dir, ".h5")))
    summary = run_encode_corpus(config)
    killer.join(timeout=5)
    removed = killer.record
    assert removed, "the job finished before a node could be removed"
    assert removed["files_before"] < 48, "every shard was written before the node was lost"

    corpus = H5Corpus(run_dir)
    got = np.concatenate([i for i, _ in corpus.iter_chunks(chunk_rows=500)]).tolist()
    assert summary["shards"] == 48 and summary["rows"] == 2400
    assert len(got) == len(set(got)) == 2400 and sorted(got) == sorted(ids)  # one row per page
    assert corpus.verify() == [] and not storage.list_temporary(run_dir)
    print(f"\nencode_corpus: node removed after {removed['after_s']:.1f} s with {removed['files_before']}/48 shards "
          f"written; finished with {summary['rows']} rows in {summary['timings_s']['total']:.1f} s")
