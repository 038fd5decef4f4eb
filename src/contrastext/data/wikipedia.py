"""Wikipedia readers: MediaWiki XML dumps (single stream or multistream + index) and HF-layout page tables.

Every reader yields :class:`Page` rows ``(page_id, title, text, categories)`` and :class:`Skipped` records
``(reason, page_id, title, detail)``; a page that cannot be used is counted under its reason and never stops
the run. Skip reasons:

- ``redirect``, ``namespace`` (not an article), ``empty_text``, ``empty_after_cleaning``;
- ``xml_error`` (the ``<page>`` element does not parse), ``missing_field`` (no id/title, id not an integer),
  ``wikitext_error`` (the wikitext parser failed);
- ``truncated_input`` / ``corrupt_input`` (the compressed stream ends early or is damaged: the page being
  read is lost, everything before it is kept; in a multistream dump only that stream's chunk is affected).

The dump is cut into ``<page>`` elements line by line (dumps put ``<page>`` and ``</page>`` on lines of their
own) and each element is parsed alone, so one broken page loses only itself.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterable, Iterator, Sequence

from contrastext import storage
from contrastext.data.wikitext import LinkSpan, normalize_category, normalize_title, parse_wikitext

__all__ = [
    "DumpChunk", "Page", "Skipped", "ReadStats", "LinkSpan", "parse_wikitext", "normalize_category",
    "normalize_title", "read_multistream_index", "plan_dump_chunks", "iter_dump_chunk", "iter_dump",
    "iter_table_pages", "read_categories_table",
]

_READ_BYTES = 1 << 20
_ARTICLE_NAMESPACE = 0


@dataclass
class Page:
    page_id: int
    title: str
    text: str
    categories: list[str]
    links: list[LinkSpan] | None = None

    def as_row(self) -> dict:
        row = {"page_id": self.page_id, "title": self.title, "text": self.text, "categories": self.categories}
        if self.links is not None:
            row["links"] = [{"target": s.target, "start": s.start, "end": s.end} for s in self.links]
        return row


@dataclass
class Skipped:
    reason: str
    page_id: int | None = None
    title: str | None = None
    detail: str = ""


@dataclass
class ReadStats:
    """Pages kept and pages skipped by reason, with a few examples of each reason for the report."""

    pages: int = 0
    skipped: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    max_examples: int = 3

    def add(self, item: Page | Skipped) -> None:
        if isinstance(item, Page):
            self.pages += 1
            return
        self.skipped[item.reason] += 1
        shown = self.examples.setdefault(item.reason, [])
        if len(shown) < self.max_examples:
            shown.append(f"{item.page_id}:{item.title}: {item.detail}".strip(": "))

    def merge(self, other: "ReadStats") -> None:
        self.pages += other.pages
        self.skipped.update(other.skipped)
        for reason, shown in other.examples.items():
            mine = self.examples.setdefault(reason, [])
            mine.extend(shown[: max(0, self.max_examples - len(mine))])

    def to_dict(self) -> dict:
        return {"pages": self.pages, "skipped": dict(self.skipped), "examples": self.examples}

    @classmethod
    def from_dict(cls, data: dict) -> "ReadStats":
        return cls(pages=data["pages"], skipped=Counter(data["skipped"]), examples=data.get("examples", {}))


# ---------------------------------------------------------------------------------------------- dumps
@dataclass(frozen=True)
class DumpChunk:
    """A byte range of a dump that one task reads: the whole file, or a run of multistream bz2 streams."""

    path: str
    start: int = 0
    end: int | None = None  # None: to the end of the file
    index: int = 0


def read_multistream_index(index_path: str | Path) -> list[int]:
    """Distinct stream offsets, ascending, from ``*-multistream-index.txt[.bz2]`` (``offset:page_id:title``)."""
    raw = storage.open_input(index_path)
    offsets: set[int] = set()
    with raw, (bz2.open(raw, "rt", encoding="utf-8") if str(index_path).endswith(".bz2")
               else io.TextIOWrapper(raw, encoding="utf-8")) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            head = line.split(":", 1)[0]
            if not head.isdigit():
                raise ValueError(f"{index_path}:{number}: not an 'offset:page_id:title' line: {line[:80]!r}")
            offsets.add(int(head))
    return sorted(offsets)


def plan_dump_chunks(path: str | Path, index_path: str | Path | None = None,
                     streams_per_chunk: int = 20) -> list[DumpChunk]:
    """Work units for a dump: one chunk (single stream), or groups of ``streams_per_chunk`` streams."""
    path = str(path)
    if index_path is None:
        return [DumpChunk(path)]
    offsets = read_multistream_index(index_path)
    if not offsets:
        return [DumpChunk(path)]
    chunks = [DumpChunk(path, 0, offsets[0], 0)] if offsets[0] > 0 else []  # the <siteinfo> header stream
    for i in range(0, len(offsets), streams_per_chunk):
        end = offsets[i + streams_per_chunk] if i + streams_per_chunk < len(offsets) else None
        chunks.append(DumpChunk(path, offsets[i], end, len(chunks)))
    return chunks


class _InputError(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def decompressed(f: IO[bytes], start: int, end: int | None, compression: str) -> Iterator[bytes]:
    """Decompressed bytes of ``f[start:end]``; concatenated bz2 streams are read one after the other."""
    f.seek(start)
    remaining = None if end is None else end - start
    if compression == "none":
        while remaining is None or remaining > 0:
            data = f.read(_READ_BYTES if remaining is None else min(_READ_BYTES, remaining))
            if not data:
                return
            if remaining is not None:
                remaining -= len(data)
            yield data
        return
    if compression == "gzip":
        with gzip.GzipFile(fileobj=f) as gz:
            try:
                while data := gz.read(_READ_BYTES):
                    yield data
            except EOFError as error:
                raise _InputError("truncated_input", f"gzip stream ends early: {error}") from None
            except (OSError, gzip.BadGzipFile) as error:
                raise _InputError("corrupt_input", f"gzip data damaged: {error}") from None
        return
    decompressor = bz2.BZ2Decompressor()
    fresh = True  # nothing fed to the current decompressor yet
    while True:
        data = f.read(_READ_BYTES if remaining is None else min(_READ_BYTES, remaining))
        if remaining is not None:
            remaining -= len(data)
        if not data:
            if not fresh and not decompressor.eof:
                raise _InputError("truncated_input", "bz2 stream ends before its end-of-stream marker")
            return
        while data:
            try:
                out = decompressor.decompress(data)
            except OSError as error:
                raise _InputError("corrupt_input", f"bz2 data damaged: {error}") from None
            fresh = False
            if out:
                yield out
            if decompressor.eof:
                data = decompressor.unused_data
                decompressor = bz2.BZ2Decompressor()
                fresh = True
            else:
                data = b""
        if remaining is not None and remaining <= 0:
            if not fresh and not decompressor.eof:
                raise _InputError("truncated_input", "bz2 stream ends before its end-of-stream marker")
            return


def compression_of(path: str) -> str:
    """``bz2``, ``gzip`` or ``none``, from a dump file's name (what :func:`decompressed` expects)."""
    lowered = path.lower()
    if lowered.endswith(".bz2"):
        return "bz2"
    if lowered.endswith(".gz"):
        return "gzip"
    return "none"


def _page_elements(chunks: Iterable[bytes]) -> Iterator[bytes | _InputError]:
    """``<page>…</page>`` byte blocks; an unclosed one is yielded as an ``xml_error``."""
    pending = b""
    block: list[bytes] | None = None
    try:
        for data in chunks:
            pending += data
            lines = pending.split(b"\n")
            pending = lines.pop()
            for line in lines:
                stripped = line.strip()
                if stripped == b"<page>":
                    if block is not None:
                        yield _InputError("xml_error", "<page> opened before the previous one closed")
                    block = [line]
                elif block is not None:
                    block.append(line)
                    if stripped == b"</page>":
                        yield b"\n".join(block)
                        block = None
    except _InputError as error:
        if block is not None:  # the page in progress is the one lost
            yield _InputError(error.reason, error.detail + " (page in progress lost)")
        else:
            yield error
        return
    if block is not None:
        yield _InputError("xml_error", "input ends inside a <page> element")


def _text(element: ET.Element, tag: str) -> str | None:
    found = element.find(tag)
    return None if found is None else (found.text or "")


def _page_from_xml(block: bytes, links: bool) -> Page | Skipped:
    try:
        element = ET.fromstring(block)
    except ET.ParseError as error:
        title = None
        start, end = block.find(b"<title>"), block.find(b"</title>")
        if 0 <= start < end:
            title = block[start + 7:end].decode("utf-8", "replace")
        return Skipped("xml_error", None, title, str(error))
    title = _text(element, "title")
    raw_id = _text(element, "id")
    if not title or raw_id is None or not raw_id.strip().isdigit():
        return Skipped("missing_field", None, title, f"id={raw_id!r}")
    page_id = int(raw_id)
    wikitext = _text(element, "revision/text") or ""
    if element.find("redirect") is not None or wikitext.lstrip()[:9].upper() == "#REDIRECT":
        return Skipped("redirect", page_id, title)
    namespace = (_text(element, "ns") or "0").strip()
    if namespace != str(_ARTICLE_NAMESPACE):
        return Skipped("namespace", page_id, title, f"ns={namespace}")
    if not wikitext.strip():
        return Skipped("empty_text", page_id, title)
    try:
        parsed = parse_wikitext(wikitext, links=links)
    except Exception as error:  # noqa: BLE001 -- a parser bug on one page must not stop the corpus
        return Skipped("wikitext_error", page_id, title, f"{type(error).__name__}: {error}")
    if not parsed.text:
        return Skipped("empty_after_cleaning", page_id, title)
    return Page(page_id, title, parsed.text, parsed.categories, parsed.links if links else None)


def iter_dump_chunk(chunk: DumpChunk, *, links: bool = False) -> Iterator[Page | Skipped]:
    """Pages of one chunk of a dump (see :func:`plan_dump_chunks`)."""
    try:
        f = storage.open_input(chunk.path)  # range reads: a task reads only its chunk, also from a bucket
    except OSError as error:
        raise FileNotFoundError(f"cannot open Wikipedia dump {chunk.path}: {error}") from error
    with f:
        blocks = _page_elements(decompressed(f, chunk.start, chunk.end, compression_of(chunk.path)))
        for block in blocks:
            if isinstance(block, _InputError):
                yield Skipped(block.reason, None, None, f"{storage.name(chunk.path)}@{chunk.start}: {block.detail}")
            else:
                yield _page_from_xml(block, links)


def iter_dump(path: str | Path, index_path: str | Path | None = None, *, links: bool = False,
              streams_per_chunk: int = 20) -> Iterator[Page | Skipped]:
    """All pages of a dump in file order, chunk after chunk (the single-process reader)."""
    for chunk in plan_dump_chunks(path, index_path, streams_per_chunk):
        yield from iter_dump_chunk(chunk, links=links)


# ------------------------------------------------------------------------- Hugging Face page tables
def _read_records(path: str | Path) -> list[dict]:
    """Rows of a parquet, JSON-lines (optionally gzipped) or CSV file, chosen by extension."""
    import pyarrow.csv

    lowered = str(path).lower()
    if lowered.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")):
        # json, not pyarrow.json: a column may mix lists and strings across rows
        raw = storage.open_input(path)
        rows = []
        with raw, (gzip.open(raw, "rt", encoding="utf-8") if lowered.endswith(".gz")
                   else io.TextIOWrapper(raw, encoding="utf-8")) as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as error:
                        raise ValueError(f"{path}:{number}: not a JSON object: {error}") from None
        return rows
    if lowered.endswith((".csv", ".csv.gz")):
        with storage.open_input(path) as raw:
            return pyarrow.csv.read_csv(raw).to_pylist()
    return storage.read_parquet(path).to_pylist()


def _as_category_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            value = json.loads(stripped)
        else:
            value = stripped.split("|")
    out: list[str] = []
    for item in value:
        name = normalize_category(str(item)) if item is not None else ""
        if name and name not in out:
            out.append(name)
    return out


def read_categories_table(path: str | Path) -> tuple[str, dict]:
    """``(key, mapping)`` from a table of ``page_id`` or ``title`` → ``categories``.

    ``categories`` is a list, a JSON list or a ``|``-separated string; several rows for one page are merged.
    """
    records = _read_records(path)
    columns = set(records[0]) if records else set()
    if "categories" not in columns:
        raise ValueError(f"{path}: a categories table needs a 'categories' column; it has {sorted(columns)}")
    key = "page_id" if "page_id" in columns else "title" if "title" in columns else None
    if key is None:
        raise ValueError(f"{path}: a categories table needs a 'page_id' or 'title' column; it has {sorted(columns)}")
    mapping: dict = {}
    for record in records:
        k, cats = record.get(key), record.get("categories")
        if k is None:
            continue
        k = int(k) if key == "page_id" else normalize_title(str(k))
        merged = mapping.setdefault(k, [])
        merged.extend(c for c in _as_category_list(cats) if c not in merged)
    return key, mapping


def iter_table_pages(rows: Iterable[dict], categories: tuple[str, dict] | None) -> Iterator[Page | Skipped]:
    """Pages from rows of the HF ``wikipedia`` layout (``id, url, title, text``) joined with categories.

    Without a categories table, a row's own ``categories`` column is used (the pages layout of build_corpus).
    """
    key, mapping = categories if categories is not None else ("page_id", {})
    for row in rows:
        raw_id, title, text = row.get("id", row.get("page_id")), row.get("title"), row.get("text")
        try:
            page_id = int(raw_id)
        except (TypeError, ValueError):
            yield Skipped("missing_field", None, title, f"id={raw_id!r}")
            continue
        if not title:
            yield Skipped("missing_field", page_id, title, "no title")
            continue
        if text is None or not str(text).strip():
            yield Skipped("empty_text", page_id, title)
            continue
        lookup = page_id if key == "page_id" else normalize_title(str(title))
        own = _as_category_list(row.get("categories")) if categories is None else []
        yield Page(page_id, str(title), str(text).strip(), list(mapping.get(lookup, own)))


def iter_table_file(path: str | Path, categories: tuple[str, dict] | None,
                    batch_rows: int = 4096) -> Iterator[Page | Skipped]:
    """Pages of one parquet / JSON-lines file in the HF layout, read in record batches."""
    lowered = str(path).lower()
    if lowered.endswith(".parquet"):
        for batch in storage.parquet_file(path).iter_batches(batch_size=batch_rows):
            yield from iter_table_pages(batch.to_pylist(), categories)
        return
    yield from iter_table_pages(_read_records(path), categories)


def table_files(paths: Sequence[str | Path] | str | Path) -> list[str]:
    """Expand folders into their parquet/JSON files, sorted, so work units are the same on every run."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: list[str] = []
    for p in map(str, paths):
        if storage.is_dir(p):
            out.extend(f for f in storage.list_files(p, recursive=True)
                       if f.lower().endswith((".parquet", ".jsonl", ".json", ".jsonl.gz")))
        elif storage.is_file(p):
            out.append(p)
        else:
            raise FileNotFoundError(f"page table {p} not found")
    if not out:
        raise FileNotFoundError(f"no parquet or JSON-lines page files under {list(map(str, paths))}")
    return out
