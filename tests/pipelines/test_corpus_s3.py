"""The corpus jobs with every input and output on object storage (moto's S3 API on 127.0.0.1)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from contrastext import storage
from contrastext.config import EncoderConfig, OutputConfig
from contrastext.data.h5store import H5Corpus
from contrastext.data.pages import PAGE_SCHEMA
from contrastext.data.pairs import PairOptions
from contrastext.data.samples import find_dump_sample
from contrastext.pipelines.corpus import BuildCorpusConfig, EncodeCorpusConfig, run_build_corpus, run_encode_corpus

pytestmark = [pytest.mark.ray, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def _relative(files: list[str], root: str) -> set[str]:
    return {f[len(root) + 1:] for f in files}


def test_build_and_encode_corpus_on_a_bucket(ray_session, s3_bucket, tiny_encoder_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a stray local write would land here
    dump = s3_bucket + "/input/" + find_dump_sample().name
    storage.upload_file(find_dump_sample(), dump)  # the input is a URI too
    runs = s3_bucket + "/runs"
    built = run_build_corpus(BuildCorpusConfig(dump=dump, pairs=PairOptions(buckets=3),
                                               output=OutputConfig(storage_path=runs, name="wiki_corpus")))
    assert built["pages"] == 106 and built["pages_with_2_categories"] == 90 and built["pairs_written"] > 4000
    corpus = runs + "/wiki_corpus"
    files = _relative(storage.list_files(corpus, recursive=True), corpus)
    assert {"manifest.json", "summary.json", "category_counts.parquet", "pages/part-00000.parquet",
            "read_stats/part-00000.json"} <= files
    assert {f"pairs/part-{b:05d}.parquet" for b in range(3)} <= files
    assert not any(f.startswith("pairs_buckets/") for f in files)  # the dedup work space is removed
    assert storage.read_parquet(storage.list_files(corpus + "/pairs", ".parquet")).num_rows == built["pairs_written"]

    config = EncodeCorpusConfig(encoder=EncoderConfig(model=str(tiny_encoder_dir), max_length=32), max_words=30,
                                rows_per_shard=40, output=OutputConfig(storage_path=runs, name="wiki_embeddings"))
    encoded = run_encode_corpus(config)  # pages found at <storage_path>/wiki_corpus/pages, on the bucket
    assert encoded["rows"] == 106 and encoded["shards"] == 3
    embeddings = H5Corpus(runs + "/wiki_embeddings")
    assert embeddings.verify() == [] and len(embeddings) == 106
    pages = storage.read_parquet(corpus + "/pages/part-00000.parquet", ["page_id"]).column("page_id").to_pylist()
    assert embeddings.lookup(pages[:5]).shape == (5, 32)
    assert not list(tmp_path.iterdir())  # nothing was written on the local disk

    again = run_build_corpus(BuildCorpusConfig(dump=dump, pairs=PairOptions(buckets=3),
                                               output=OutputConfig(storage_path=runs, name="wiki_corpus")))
    assert again["pages"] == 106 and again["timings_s"]["read"] < built["timings_s"]["read"]  # units kept
    assert run_encode_corpus(config)["shards_kept"] == 3


def _synthetic_pages(location: str, n: int) -> list[int]:
    rng = np.random.default_rng(1)
    ids = rng.permutation(np.arange(50_000, 50_000 + n)).tolist()
    words = "rivers mountains towns wizards boxing judges foxes dogs bridges markets".split()
    texts = [" ".join(rng.choice(words, size=int(rng.integers(5, 60)))) for _ in ids]
    table = pa.table({"page_id": pa.array(ids, pa.int64()), "title": [f"P{i}" for i in ids], "text": texts,
                      "categories": [["A", "B"]] * n}, schema=PAGE_SCHEMA)
    storage.write_parquet(table, location, row_group_size=100)
    return ids


def test_killed_encode_on_a_bucket_resumes_with_one_row_per_page(ray_session, s3_bucket, tiny_encoder_dir):
    pages = s3_bucket + "/pages/part-00000.parquet"
    ids = _synthetic_pages(pages, 1500)
    run_dir = s3_bucket + "/runs/emb"
    settings = {"pages": pages, "encoder.model": str(tiny_encoder_dir), "encoder.max_length": 32,
                "max_words": 20, "rows_per_shard": 50, "output.storage_path": s3_bucket + "/runs",
                "output.name": "emb", "scaling.cpus_per_worker": 1}
    env = {**os.environ, "RAY_ADDRESS": ray_session.get_runtime_context().gcs_address,
           "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen([sys.executable, str(REPO / "jobs" / "encode_corpus.py"),
                                *[f"--set={k}={v}" for k, v in settings.items()]],
                               env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 900  # generous: a worker start and a model load on a busy machine
    try:
        while time.monotonic() < deadline and not storage.list_files(run_dir, ".h5"):
            assert process.poll() is None, "the first run ended before writing a shard"
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    written_before = storage.list_files(run_dir, ".h5")
    assert 0 < len(written_before) < 30, "nothing to resume: the first run wrote no shard or all of them"
    assert not storage.exists(run_dir + "/manifest.json")  # not finished: no reader takes it

    from contrastext.config import load_config

    config = load_config(EncodeCorpusConfig, None, [f"{k}={v}" for k, v in settings.items()])
    summary = run_encode_corpus(config)
    assert summary["shards"] == 30 and summary["shards_kept"] >= len(written_before)
    assert summary["shards_kept"] + summary["shards_written"] == 30
    corpus = H5Corpus(run_dir)
    got = np.concatenate([i for i, _ in corpus.iter_chunks(chunk_rows=400)]).tolist()
    assert len(got) == len(set(got)) == 1500 and sorted(got) == sorted(ids)  # no duplicates, no losses
    assert corpus.verify() == []
    assert not storage.list_temporary(run_dir)
