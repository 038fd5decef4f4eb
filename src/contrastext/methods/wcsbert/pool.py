"""The unlabelled pool of self-training, as a pages table (``page_id``, ``title``, ``text``, ``categories``).

Wikipedia pools are the corpus job's pages files as they are. A plain-text pool is written in the same
layout (row number as page id, no categories), so encoding, streaming and scoring are one code path.
Every location may be a local path or a URI.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa

from contrastext import storage
from contrastext.data.pages import PAGE_SCHEMA


def write_text_pool(texts: Sequence[str], location: str) -> str:
    """``texts`` as a pages file (replacing an older one only when the texts differ)."""
    table = pa.table({"page_id": pa.array(np.arange(len(texts), dtype=np.int64)),
                      "title": pa.array([""] * len(texts), pa.string()),
                      "text": pa.array(list(texts), pa.string()),
                      "categories": pa.array([[] for _ in texts], pa.list_(pa.string()))}, schema=PAGE_SCHEMA)
    if storage.is_file(location) and storage.read_parquet(location).equals(table):
        return location
    return storage.write_parquet(table, location)


def pages_files(pages: str) -> list[str]:
    files = [pages] if storage.is_file(pages) else storage.list_files(pages, ".parquet")
    if not files:
        raise FileNotFoundError(f"no pages parquet at {pages}")
    return files


def iter_page_batches(pages: str, columns: Sequence[str], batch_rows: int = 8192) -> Iterator[pa.RecordBatch]:
    """The pages a record batch at a time: memory is bounded by one batch, not by the pool."""
    for f in pages_files(pages):
        yield from storage.parquet_file(f).iter_batches(batch_size=batch_rows, columns=list(columns))


#: row groups a sample of the pool is drawn from at most (each read whole: the corpus writes 2,048 pages a group)
SAMPLE_ROW_GROUPS = 50


def sample_texts(pages: str, rows: int, max_words: int, seed: int = 0) -> list[str]:
    """A seeded sample of about ``rows`` texts of the pool, each cut at ``max_words`` as it is encoded (empty
    texts left out): an even share of ``rows`` from each of up to SAMPLE_ROW_GROUPS row groups drawn at random
    across the pool's files, so memory is bounded by those groups whatever the pool's size, and a pool stored
    in some order (by source, by label) is not measured on its first rows only."""
    from contrastext.data.h5store import first_words

    rng = np.random.default_rng(seed)
    files = [storage.parquet_file(f) for f in pages_files(pages)]  # each opened once
    groups = [(file, g) for file in files for g in range(file.metadata.num_row_groups)]
    chosen = [groups[i] for i in rng.permutation(len(groups))[:SAMPLE_ROW_GROUPS]]
    share = -(-rows // max(1, len(chosen)))
    texts: list[str] = []
    for file, g in chosen:
        column = [t for t in file.read_row_group(g, columns=["text"]).column("text").to_pylist() if t]
        texts += [first_words(column[i], max_words) for i in sorted(rng.permutation(len(column))[:share])]
    return texts[:rows]


def iter_pages(pages: str, columns: Sequence[str]) -> Iterator[dict]:
    for batch in iter_page_batches(pages, columns):
        yield from batch.to_pylist()


def page_columns(pages: str, ids: np.ndarray, column: str) -> list:
    """``column`` of the pages with ``ids``, in the order of ``ids`` (every id must exist)."""
    out: list = [None] * len(ids)
    for n, value in iter_page_column(pages, ids, column):
        out[n] = value
    return out


def iter_page_column(pages: str, ids: np.ndarray, column: str) -> Iterator[tuple[int, object]]:
    """``(n, value)``: ``column`` of the page with id ``ids[n]``, in the order of the pages files, a record batch
    at a time (memory: the ids and one batch, not the values of every page); every id must exist.

    A batch's pages are matched by binary search in the sorted ids (O(batch × log ids)); ``pc.is_in`` would
    hash every id again for every batch, quadratic in the pool when half of it is wanted."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = np.asarray(ids, dtype=np.int64)[order]
    found = 0
    for batch in iter_page_batches(pages, ["page_id", column]):
        page_ids = batch.column(0).to_numpy()
        at = np.searchsorted(sorted_ids, page_ids).clip(max=max(len(sorted_ids) - 1, 0))
        hit = np.flatnonzero(sorted_ids[at] == page_ids) if len(sorted_ids) else np.zeros(0, np.int64)
        if not len(hit):
            continue
        values = batch.column(1).take(pa.array(hit)).to_pylist()
        yield from zip(order[at[hit]].tolist(), values)
        found += len(hit)
    if found < len(ids):
        raise KeyError(f"{len(ids) - found} page ids not found under {pages}")
