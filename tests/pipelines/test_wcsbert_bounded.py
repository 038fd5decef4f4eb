"""Pretraining's preparation reads the corpus without holding it: the pair count and the dev pages."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from contrastext.methods.wcsbert.config import PretrainConfig, WCSBertConfig
from contrastext.methods.wcsbert.category_pretraining import dev_pages, pairs_left


def test_pairs_left_counts_the_pairs_of_pages_not_held_out(tmp_path):
    files = []
    for f, ids in enumerate([[1, 1, 2, 3], [3, 4], []]):
        files.append(str(tmp_path / f"part-{f}.parquet"))
        pq.write_table(pa.table({"anchor": ["a"] * len(ids), "positive": ["p"] * len(ids),
                                 "page_id": pa.array(ids, pa.int64())}), files[-1])
    assert pairs_left(files, set()) == 6
    assert pairs_left(files, {1, 3}) == 2
    assert pairs_left(files, {9}) == 6


def test_dev_pages_are_the_seeded_choice_among_pages_with_three_categories(tmp_path):
    rng = np.random.default_rng(0)
    pages = tmp_path / "pages"
    pages.mkdir()
    rows = []
    for f in range(3):
        ids = np.arange(f * 40, (f + 1) * 40, dtype=np.int64)
        cats = [[f"C{j}" for j in rng.integers(0, 9, rng.integers(0, 6))] for _ in ids]
        texts = [" ".join(f"w{k}" for k in range(30)) if i % 7 else " " for i in ids]
        rows += list(zip(ids.tolist(), cats, texts))
        pq.write_table(pa.table({"page_id": ids, "text": texts, "categories": cats}), pages / f"part-{f}.parquet")
    config = WCSBertConfig(pretrain=PretrainConfig(dev_fraction=0.2, dev_min_pages=3))
    candidates = [(i, list(dict.fromkeys(c))) for i, c, _ in rows if len(set(c)) == 3]
    wanted = min(len(candidates), max(int(round(0.2 * len(candidates))), 3))
    picked = sorted(np.random.default_rng(config.pretrain.train.seed).choice(len(candidates), wanted, replace=False))
    text_of = {i: t for i, _, t in rows}
    expected = [(candidates[k], text_of[candidates[k][0]]) for k in picked if text_of[candidates[k][0]].strip()]

    queries, query_categories, ids = dev_pages(config, str(pages))
    assert query_categories == [cats for (_, cats), _ in expected]
    assert ids == {i for (i, _), _ in expected}
    assert queries == [" ".join(t.split()[:config.pretrain.query_words]) for _, t in expected]
