"""The unlabelled pool of self-training, as a pages table (``page_id``, ``title``, ``text``, ``categories``).

Wikipedia pools are the corpus job's pages files as they are. A plain-text pool is written in the same
layout (row number as page id, no categories), so encoding, streaming and scoring are one code path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from contrastext.pipelines.corpus import PAGE_SCHEMA


def write_text_pool(texts: Sequence[str], path: Path) -> Path:
    """``texts`` as a pages file (replacing an older one only when the texts differ)."""
    table = pa.table({"page_id": pa.array(np.arange(len(texts), dtype=np.int64)),
                      "title": pa.array([""] * len(texts), pa.string()),
                      "text": pa.array(list(texts), pa.string()),
                      "categories": pa.array([[] for _ in texts], pa.list_(pa.string()))}, schema=PAGE_SCHEMA)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file() and pq.read_table(path).equals(table):
        return path
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return path


def pages_files(pages: Path) -> list[Path]:
    files = [pages] if pages.is_file() else sorted(pages.glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"no pages parquet at {pages}")
    return files


def iter_pages(pages: Path, columns: Sequence[str]) -> Iterator[dict]:
    for f in pages_files(pages):
        yield from pq.read_table(f, columns=list(columns)).to_pylist()


def page_columns(pages: Path, ids: np.ndarray, column: str) -> list:
    """``column`` of the pages with ``ids``, in the order of ``ids`` (every id must exist)."""
    wanted = {int(i): n for n, i in enumerate(ids)}
    out: list = [None] * len(ids)
    found = 0
    for row in iter_pages(pages, ["page_id", column]):
        n = wanted.get(int(row["page_id"]))
        if n is not None:
            out[n] = row[column]
            found += 1
    if found < len(ids):
        raise KeyError(f"{len(ids) - found} page ids not found under {pages}")
    return out
