"""The scale benchmark at a tiny size: synthetic corpus → the real WC-SBERT chain → one row per stage."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

pytestmark = [pytest.mark.slow, pytest.mark.ray]

EXPECTED_STAGES = [
    "corpus: read page table", "corpus: category pairs", "pretrain: dev pages, pair count, dev MAP",
    "pretrain: fit (2 steps)", "encode pool (M_0)",
    *[f"round 1, {teacher}: {part}" for teacher in ("prompts", "prototypes")
      for part in ("score + select", "fit (2 steps)", "re-encode pool", "evaluate")],
]


def test_synthetic_corpus_has_the_pages_layout_and_wikipedia_like_statistics(ray_session, tmp_path):
    import pyarrow.parquet as pq
    from synthetic_wiki import generate

    corpus = generate(2_000, tmp_path)
    table = pq.read_table(corpus["pages_dir"])
    assert table.column_names == ["page_id", "title", "text", "categories"]
    assert table.num_rows == 2_000 and len(set(table.column("page_id").to_pylist())) == 2_000
    assert min(len(t.split()) for t in table.column("text").to_pylist()) >= 200
    assert 3.5 < corpus["mean_categories"] < 6
    eval_rows = [json.loads(line) for line in Path(corpus["eval"]).read_text().splitlines()]
    assert eval_rows and {r["label"] for r in eval_rows} <= set(corpus["labels"])
    assert generate(2_000, tmp_path)["generated"] is False  # a finished corpus is reused


def test_chain_at_2000_pages_reports_every_stage(ray_session, tmp_path):
    from scale import ChainSettings, measure, table

    result = measure(2_000, {"all"}, tmp_path, ChainSettings(pretrain_steps=2, round_steps=2))
    names = [s["stage"] for s in result["stages"]]
    for expected in EXPECTED_STAGES:
        assert expected in names
    assert any("final evaluation" in n for n in names)
    for stage in result["stages"]:
        assert stage["rows_per_s"] > 0 and stage["driver_peak_rss_mib"] >= stage["driver_peak_private_mib"] > 0, stage
    assert max(s["worker_peak_rss_mib"] for s in result["stages"]) > 0
    assert "encode pool (M_0)" in table([result])
