"""The pages table: the layout of the corpus job's ``pages/*.parquet`` files and of self-training pools.

``page_id`` int64, ``title`` string, ``text`` string (plain text), ``categories`` list<string>; plus
``links`` list<struct<target, start, end>> when link spans are kept.
"""

from __future__ import annotations

import pyarrow as pa

_PAGE_FIELDS = [("page_id", pa.int64()), ("title", pa.string()), ("text", pa.string()),
                ("categories", pa.list_(pa.string()))]
PAGE_SCHEMA = pa.schema(_PAGE_FIELDS)
PAGE_SCHEMA_WITH_LINKS = pa.schema(_PAGE_FIELDS + [("links", pa.list_(pa.struct(
    [("target", pa.string()), ("start", pa.int32()), ("end", pa.int32())])))])


def pages_table(rows: list[dict], links: bool = False) -> pa.Table:
    """Page rows (``Page.as_row()``) as a table of :data:`PAGE_SCHEMA`, or of the schema with links."""
    return pa.Table.from_pylist(rows, schema=PAGE_SCHEMA_WITH_LINKS if links else PAGE_SCHEMA)
