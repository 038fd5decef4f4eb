"""Streaming one column of chosen pages from the pages files."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contrastext.methods.wcsbert.pool import iter_page_column, page_columns


def _pages(folder, files: int = 3, rows: int = 5):
    folder.mkdir()
    for f in range(files):
        ids = np.arange(f * rows, (f + 1) * rows, dtype=np.int64) * 10
        pq.write_table(pa.table({"page_id": ids, "categories": [[f"C{i}"] for i in ids]}),
                       folder / f"part-{f:05d}.parquet")
    return str(folder)


def test_iter_page_column_gives_each_wanted_page_once_with_its_position(tmp_path):
    pages = _pages(tmp_path / "pages")
    ids = np.asarray([120, 0, 70, 30])
    got = dict(iter_page_column(pages, ids, "categories"))
    assert got == {0: ["C120"], 1: ["C0"], 2: ["C70"], 3: ["C30"]}
    assert [got[n] for n in range(len(ids))] == page_columns(pages, ids, "categories")


def test_iter_page_column_raises_for_a_missing_id(tmp_path):
    pages = _pages(tmp_path / "pages")
    with pytest.raises(KeyError, match="1 page ids not found"):
        list(iter_page_column(pages, np.asarray([0, 5]), "categories"))



def test_a_batch_is_matched_against_the_sorted_ids_not_a_hash_set_per_batch(tmp_path, monkeypatch):
    """``pc.is_in(value_set=ids)`` hashes every wanted id again for every batch: quadratic in the pool when half
    of it is wanted (a round's score + select took 2.3× longer per page at 1M pages than at 100k)."""
    import pyarrow.compute as pc

    def refuse(*args, **kwargs):
        raise AssertionError("pc.is_in rebuilds the id set for every batch")

    monkeypatch.setattr(pc, "is_in", refuse)
    pages = _pages(tmp_path / "pages", files=4, rows=50)
    ids = np.arange(0, 2_000, 20)  # every other page, in order
    got = dict(iter_page_column(pages, ids[::-1].copy(), "categories"))
    assert got == {n: [f"C{i}"] for n, i in enumerate(ids[::-1])}
