"""The corpus jobs on a local Ray: build_corpus on the real dump (as multistream), encode_corpus with the tiny
encoder, a killed encode run resumed, and the bundled MiniLM on the real pages."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contrastext.config import EncoderConfig, OutputConfig, ScalingSettings
from contrastext.data.h5store import H5Corpus, first_words
from contrastext.data.multistream import repack_as_multistream
from contrastext.data.pages import PAGE_SCHEMA
from contrastext.data.pairs import PAIR_SCHEMA, PairOptions
from contrastext.data.samples import DEFAULT_SAMPLE
from contrastext.pipelines.corpus import (BuildCorpusConfig, EncodeCorpusConfig, plan_units, run_build_corpus,
                                          run_encode_corpus)
from tests.conftest import wikipedia_sample

pytestmark = [pytest.mark.ray, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(ray_session, tmp_path_factory):
    """build_corpus on the real sample repacked as multistream: several read tasks run in parallel."""
    tmp = tmp_path_factory.mktemp("corpus")
    dump, index = tmp / "multistream.xml.bz2", tmp / "multistream-index.txt.bz2"
    repack_as_multistream(wikipedia_sample(DEFAULT_SAMPLE), dump, index, pages_per_stream=25)
    config = BuildCorpusConfig(dump=str(dump), index=str(index), streams_per_chunk=3,
                               pairs=PairOptions(buckets=4, max_pairs_per_page=200),
                               output=OutputConfig(storage_path=str(tmp), name="wiki"))
    return config, run_build_corpus(config), tmp / "wiki"


def test_build_corpus_on_the_real_dump(built, capsys):
    config, summary, run_dir = built
    assert summary["work_units"] == 1 + 3  # header stream + 9 streams of pages in runs of 3
    assert summary["pages"] == 106 and summary["skipped"] == {"redirect": 100}
    assert summary["pages_with_2_categories"] == 90 and summary["distinct_categories"] == 823
    pages = pq.read_table(run_dir / "pages")
    assert pages.schema.equals(PAGE_SCHEMA) and pages.num_rows == 106
    assert len(set(pages.column("page_id").to_pylist())) == 106
    pairs = pq.read_table(run_dir / "pairs")
    assert pairs.schema.equals(PAIR_SCHEMA) and pairs.num_rows == summary["pairs_written"] > 4000
    assert summary["pairs_generated"] >= summary["pairs_written"] and summary["pair_pages_capped"] >= 1
    rows = pairs.to_pylist()
    assert len({(r["anchor"], r["positive"]) for r in rows}) == len(rows)  # deduplicated
    assert all(r["anchor"] < r["positive"] for r in rows)
    cats = dict(zip(pages.column("page_id").to_pylist(), pages.column("categories").to_pylist()))
    assert all(r["anchor"] in cats[r["page_id"]] and r["positive"] in cats[r["page_id"]] for r in rows[:500])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["job"] == "build_corpus" and manifest["counts"]["pages"] == 106
    assert manifest["counts"]["pairs_written"] == pairs.num_rows
    assert all(v.startswith("sha256:") for v in manifest["inputs"].values())
    assert (run_dir / "summary.json").is_file()


def test_build_corpus_again_skips_finished_units(built):
    config, first, run_dir = built
    again = run_build_corpus(config)
    assert again["pages"] == first["pages"] and again["pairs_written"] == first["pairs_written"]
    assert again["timings_s"]["read"] < first["timings_s"]["read"]


def test_default_input_is_the_real_sample():
    real = wikipedia_sample(DEFAULT_SAMPLE)
    units, inputs = plan_units(BuildCorpusConfig())
    assert len(units) == 1 and Path(units[0]["path"]).samefile(real) and units[0]["end"] is None


# ------------------------------------------------------------------------------------- encoding
WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches in "
         "old towns near rivers and mountains").split()


def _synthetic_pages(path: Path, n: int, files: int = 2) -> list[int]:
    rng = np.random.default_rng(0)
    ids = rng.permutation(np.arange(10_000, 10_000 + n)).tolist()
    path.mkdir(parents=True, exist_ok=True)
    per = (n + files - 1) // files
    for f in range(files):
        part = ids[f * per:(f + 1) * per]
        texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(5, 300)))) for _ in part]
        pq.write_table(pa.table({"page_id": pa.array(part, pa.int64()), "title": [f"P{i}" for i in part],
                                 "text": texts, "categories": [["A", "B"]] * len(part)}, schema=PAGE_SCHEMA),
                       path / f"part-{f:05d}.parquet", row_group_size=256)
    return ids


def _encode_config(pages: Path, out: Path, encoder_dir, **kwargs) -> EncodeCorpusConfig:
    return EncodeCorpusConfig(pages=str(pages), encoder=EncoderConfig(model=str(encoder_dir), max_length=32),
                              max_words=20, output=OutputConfig(storage_path=str(out), name="emb"),
                              scaling=ScalingSettings(num_workers=1, cpus_per_worker=1), **kwargs)


def _all_ids(corpus: H5Corpus) -> list[int]:
    return np.concatenate([ids for ids, _ in corpus.iter_chunks(chunk_rows=333)]).tolist()


def test_killed_encode_resumes_with_one_row_per_page(ray_session, tiny_encoder_dir, tmp_path):
    ids = _synthetic_pages(tmp_path / "pages", 3000)
    config = _encode_config(tmp_path / "pages", tmp_path, tiny_encoder_dir, rows_per_shard=50, rows_per_task=50)
    run_dir = tmp_path / "emb"
    env = {**os.environ, "RAY_ADDRESS": ray_session.get_runtime_context().gcs_address,
           "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    command = [sys.executable, str(REPO / "jobs" / "encode_corpus.py"),
               *[f"--set={k}={v}" for k, v in {
                   "pages": config.pages, "encoder.model": config.encoder.model, "encoder.max_length": 32,
                   "max_words": 20, "rows_per_shard": 50, "rows_per_task": 50, "output.storage_path": tmp_path,
                   "output.name": "emb", "scaling.cpus_per_worker": 1}.items()]]
    process = subprocess.Popen(command, env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # generous: the first shard needs a worker start and a model load, slow on a busy machine
    deadline = time.monotonic() + 900
    try:
        while time.monotonic() < deadline and not list(run_dir.glob("shard-*.h5")):
            assert process.poll() is None, "the first run ended before writing a shard"
            time.sleep(0.02)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    written_before = sorted(p.name for p in run_dir.glob("shard-*.h5"))
    assert written_before, "no shard was written before the deadline"
    assert len(written_before) < 60, "the first run finished before it was killed; nothing to resume"
    assert not (run_dir / "manifest.json").exists()

    summary = run_encode_corpus(config)
    assert summary["shards"] == 60 and summary["shards_kept"] >= len(written_before)
    assert summary["shards_kept"] + summary["shards_written"] == 60 and summary["shards_written"] >= 1
    corpus = H5Corpus(run_dir)
    got = _all_ids(corpus)
    assert len(got) == len(set(got)) == 3000 and sorted(got) == sorted(ids)  # no duplicates, no losses
    assert corpus.verify() == []

    from contrastext.models import TextEncoder

    pages = pq.read_table(tmp_path / "pages").to_pylist()[:64]
    direct = TextEncoder.from_pretrained(tiny_encoder_dir, max_length=32).encode(
        [first_words(p["text"], 20) for p in pages])
    np.testing.assert_allclose(corpus.lookup([p["page_id"] for p in pages]), direct, atol=2e-2, rtol=1e-2)

    again = run_encode_corpus(config)  # complete: nothing left to do
    assert again["shards_kept"] == 60 and again["shards_written"] == 0 and again["rows"] == 3000


def test_a_file_a_lost_writer_leaves_during_the_run_is_removed_at_its_end(ray_session, tiny_encoder_dir, tmp_path):
    # a writer on a node lost mid-run leaves its shard under a temporary name, and the shard is written again
    _synthetic_pages(tmp_path / "pages", 300, files=1)
    run_dir = tmp_path / "emb"
    left = run_dir / "shard-00000.h5.tmp-lost"
    dropped_while_running = threading.Event()

    def lose_a_writer() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not list(run_dir.glob("shard-*.h5")):
            time.sleep(0.01)
        left.write_bytes(b"half a shard")
        dropped_while_running.set()

    writer = threading.Thread(target=lose_a_writer, daemon=True)
    writer.start()
    summary = run_encode_corpus(_encode_config(tmp_path / "pages", tmp_path, tiny_encoder_dir, rows_per_shard=10))
    writer.join(timeout=5)
    assert dropped_while_running.is_set() and summary["shards_written"] == 30
    assert not left.exists() and summary["partial_files_removed"] == 1
    assert H5Corpus(run_dir).verify() == []


def test_other_configuration_on_existing_shards_is_refused(ray_session, tiny_encoder_dir, tmp_path):
    _synthetic_pages(tmp_path / "pages", 40, files=1)
    run_encode_corpus(_encode_config(tmp_path / "pages", tmp_path, tiny_encoder_dir, rows_per_shard=25))
    other = _encode_config(tmp_path / "pages", tmp_path, tiny_encoder_dir, rows_per_shard=25).model_copy(
        update={"max_words": 7})
    with pytest.raises(ValueError, match="another model, read length, word limit or plan"):
        run_encode_corpus(other)
    summary = run_encode_corpus(other.model_copy(update={"overwrite": True}))
    assert summary["shards_written"] == 2 and H5Corpus(tmp_path / "emb").attributes["max_words"] == 7


@pytest.mark.integration
def test_minilm_encodes_the_real_pages(built, tmp_path):
    _, _, run_dir = built
    config = EncodeCorpusConfig(pages=str(run_dir / "pages"), rows_per_shard=40, dtype="float32",
                                encoder=EncoderConfig(max_length=128),
                                output=OutputConfig(storage_path=str(tmp_path), name="minilm"))
    summary = run_encode_corpus(config)
    corpus = H5Corpus(tmp_path / "minilm")
    assert summary["rows"] == len(corpus) == 106 and corpus.dimension == 384
    assert corpus.attributes["model"] == "bundled:minilm" and corpus.attributes["max_words"] == 200
    pages = {r["page_id"]: r for r in pq.read_table(run_dir / "pages").to_pylist()}
    by_title = {r["title"]: i for i, r in pages.items()}
    ids = [by_title["Anarchism"], by_title["Autism"], by_title["Albedo"]]
    vectors = corpus.lookup(ids)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)  # MiniLM normalises
    similarity = vectors @ vectors.T
    assert similarity[0, 1] < 0.6 and similarity[1, 2] < 0.6  # unrelated topics stay apart
    from contrastext.models import TextEncoder

    direct = TextEncoder.from_pretrained("bundled:minilm", max_length=128).encode(
        [first_words(pages[i]["text"], 200) for i in ids])
    np.testing.assert_allclose(vectors, direct, atol=1e-4)


def test_read_unit_of_an_hf_page_table_with_categories(tmp_path):
    from contrastext.data.wikipedia import read_categories_table
    from contrastext.pipelines.corpus import read_unit

    table = tmp_path / "train.jsonl"
    table.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "7", "url": "u", "title": "Cats", "text": "Cats are small carnivorous mammals."},
        {"id": "8", "url": "u", "title": "Empty", "text": ""}]))
    cats = tmp_path / "cats.jsonl"
    cats.write_text(json.dumps({"title": "cats", "categories": ["Felines", "Domesticated_animals"]}) + "\n")
    unit = {"kind": "table", "path": str(table), "index": 3}
    result = read_unit(unit, str(tmp_path / "run"), links=False, categories=read_categories_table(cats))
    assert result["pages"] == 1 and result["skipped"] == {"empty_text": 1}
    pages = pq.read_table(tmp_path / "run" / "pages" / "part-00003.parquet").to_pylist()
    assert pages == [{"page_id": 7, "title": "Cats", "text": "Cats are small carnivorous mammals.",
                      "categories": ["Felines", "Domesticated animals"]}]
    stats = json.loads((tmp_path / "run" / "read_stats" / "part-00003.json").read_text())
    assert stats["unit"] == unit


def test_read_unit_stores_link_spans_when_asked(tmp_path):
    import bz2

    from contrastext.data.pages import PAGE_SCHEMA_WITH_LINKS
    from contrastext.pipelines.corpus import read_unit

    dump = tmp_path / "d.xml.bz2"
    dump.write_bytes(bz2.compress(
        b"<mediawiki>\n  <page>\n    <title>Cats</title>\n    <ns>0</ns>\n    <id>5</id>\n    <revision>\n"
        b"      <text>The [[domestic cat|cat]] is a [[mammal]].\n[[Category:Felines]]</text>\n"
        b"    </revision>\n  </page>\n</mediawiki>\n"))
    unit = {"kind": "dump", "path": str(dump), "start": 0, "end": None, "index": 0}
    read_unit(unit, str(tmp_path / "run"), links=True, categories=None)
    table = pq.read_table(tmp_path / "run" / "pages" / "part-00000.parquet")
    assert table.schema.equals(PAGE_SCHEMA_WITH_LINKS)
    page = table.to_pylist()[0]
    assert page["text"] == "The cat is a mammal." and page["categories"] == ["Felines"]
    assert [(s["target"], page["text"][s["start"]:s["end"]]) for s in page["links"]] == [
        ("Domestic cat", "cat"), ("Mammal", "mammal")]
