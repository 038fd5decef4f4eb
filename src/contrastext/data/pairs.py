"""Category pairs for WC-SBERT: every unordered pair of a page's categories is a positive pair.

Output (parquet, stable for the training stage): ``anchor`` string, ``positive`` string, ``page_id`` int64.

Options: drop maintenance/hidden-style categories by regular expression, drop categories seen on fewer than
``min_category_frequency`` pages, cap the pairs of one page (a deterministic sample, seeded per page), and
deduplicate across the corpus. Everything streams: pages are read in record batches, pairs are written as
they are made; deduplication hash-partitions the pairs into ``buckets`` on disk, then deduplicates one
bucket at a time, so memory is bounded by one bucket, not by the corpus. With deduplication on, each pair is
oriented alphabetically (``anchor < positive``) and keeps the smallest ``page_id`` it came from.
"""

from __future__ import annotations

import random
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from contrastext import storage
from contrastext.config import Settings

PAIR_SCHEMA = pa.schema([("anchor", pa.string()), ("positive", pa.string()), ("page_id", pa.int64())])
CATEGORY_COUNT_SCHEMA = pa.schema([("category", pa.string()), ("pages", pa.int64())])

# Maintenance and tracking categories that say nothing about a page's topic.
DEFAULT_EXCLUDE_PATTERNS = [
    r"^(All |Wikipedia )?(articles|pages)\b",
    r"^All\b.*\b(articles|pages)\b",
    r"^Articles? (with|containing|needing|lacking|to be|using|that|which|in need)\b",
    r"^Pages (with|using|containing|needing)\b",
    r"^Use (dmy|mdy|British|American|Australian|Indian|Canadian) ",
    r"^CS1\b",
    r"^Webarchive\b",
    r"^Wikipedia\b",
    r"^Commons category\b",
    r"^(Good|Featured) (articles|lists)$",
    r"\bstubs?$",
    r"^Redirects?\b",
    r"^Short description\b",
    r"^Coordinates on Wikidata$",
    r"^Official website\b",
    r"^(Dead|Broken) (external )?links\b",
]


class PairOptions(Settings):
    exclude_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_EXCLUDE_PATTERNS),
                                        description="regular expressions (case-insensitive) of categories to drop")
    min_category_frequency: int = Field(1, ge=1, description="drop categories found on fewer pages than this")
    max_pairs_per_page: int | None = Field(None, ge=1, description="cap per page (a 70-category page makes 2,415)")
    deduplicate: bool = Field(True, description="one row per distinct unordered pair across the corpus")
    buckets: int = Field(16, ge=1, description="hash partitions for deduplication (memory: one bucket at a time)")
    seed: int = 0
    write_rows: int = Field(65_536, ge=1, description="rows buffered per output file before a row group is written")


class CategoryFilter:
    """Which categories of a page take part in pairs."""

    def __init__(self, options: PairOptions, rare: set[str] | frozenset[str] = frozenset()):
        self.patterns = [re.compile(p, re.IGNORECASE) for p in options.exclude_patterns]
        self.rare = rare
        self.dropped_by_pattern: Counter = Counter()
        self.dropped_by_frequency = 0

    def __call__(self, categories: Iterable[str]) -> list[str]:
        kept: list[str] = []
        for category in categories:
            if any(p.search(category) for p in self.patterns):
                self.dropped_by_pattern[category] += 1
            elif category in self.rare:
                self.dropped_by_frequency += 1
            elif category not in kept:
                kept.append(category)
        return kept


def _unrank(index: int, n: int) -> tuple[int, int]:
    """The ``index``-th pair (i < j) of ``combinations(range(n), 2)`` without listing them."""
    i = 0
    while index >= n - 1 - i:
        index -= n - 1 - i
        i += 1
    return i, i + 1 + index


def page_pairs(page_id: int, categories: list[str], max_pairs: int | None = None,
               seed: int = 0) -> list[tuple[str, str]]:
    """All unordered pairs of ``categories`` in page order, or a deterministic sample of ``max_pairs``."""
    n = len(categories)
    total = n * (n - 1) // 2
    if total == 0:
        return []
    if max_pairs is None or total <= max_pairs:
        return list(combinations(categories, 2))
    rng = random.Random(seed * 1_000_003 + page_id)
    picked = sorted(rng.sample(range(total), max_pairs))
    return [(categories[i], categories[j]) for i, j in map(lambda k: _unrank(k, n), picked)]


def bucket_of(anchor: str, positive: str, buckets: int) -> int:
    # crc32, not hash(): the bucket of a pair must be the same in every process
    return zlib.crc32(f"{anchor}\x1f{positive}".encode("utf-8")) % buckets


@dataclass
class PairCounts:
    pages: int = 0
    pages_with_pairs: int = 0
    pages_capped: int = 0
    pairs: int = 0
    categories_dropped_by_pattern: int = 0
    categories_dropped_by_frequency: int = 0

    def merge(self, other: "PairCounts") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class _BufferedParquet:
    """A parquet file written in row groups of ``rows``; created on the first row, under a temporary name."""

    def __init__(self, location: str, schema: pa.Schema, rows: int):
        self.location, self.schema, self.rows = location, schema, rows
        self.columns: dict[str, list] = {name: [] for name in schema.names}
        self.writer: pq.ParquetWriter | None = None
        self.written = 0
        self._fs, self._path = storage.resolve(location)
        self._tmp = self._path + ".tmp"

    def append(self, *values) -> None:
        for column, value in zip(self.columns.values(), values):
            column.append(value)
        if len(next(iter(self.columns.values()))) >= self.rows:
            self.flush()

    def flush(self) -> None:
        first = next(iter(self.columns.values()))
        if not first:
            return
        if self.writer is None:
            self._fs.create_dir(self._path.rsplit("/", 1)[0], recursive=True)
            self.writer = pq.ParquetWriter(self._tmp, self.schema, filesystem=self._fs)
        self.writer.write_table(pa.table(self.columns, schema=self.schema))
        self.written += len(first)
        self.columns = {name: [] for name in self.schema.names}

    def close(self) -> int:
        self.flush()
        if self.writer is not None:
            self.writer.close()
            self._fs.move(self._tmp, self._path)
        return self.written


def iter_page_categories(pages_file: str | Path, batch_rows: int = 8192) -> Iterator[tuple[int, list[str]]]:
    """``(page_id, categories)`` of a pages parquet file, a record batch at a time."""
    parquet = storage.parquet_file(pages_file)
    for batch in parquet.iter_batches(batch_size=batch_rows, columns=["page_id", "categories"]):
        yield from zip(batch.column(0).to_pylist(), batch.column(1).to_pylist())


def count_categories(pages: Iterable[tuple[int, list[str]]]) -> Counter:
    """Pages per category."""
    counts: Counter = Counter()
    for _, categories in pages:
        counts.update(set(categories or ()))
    return counts


def write_category_counts(counts: Counter, location: str | Path) -> None:
    table = pa.table({"category": list(counts), "pages": list(counts.values())}, schema=CATEGORY_COUNT_SCHEMA)
    storage.write_parquet(table, location)


def merge_category_counts(paths: Iterable[str | Path]) -> pa.Table:
    """One ``(category, pages)`` table from per-chunk count files (summed by category)."""
    tables = [storage.read_parquet(p) for p in paths]
    if not tables:
        return CATEGORY_COUNT_SCHEMA.empty_table()
    merged = pa.concat_tables(tables).group_by("category").aggregate([("pages", "sum")])
    return merged.rename_columns(["category", "pages"])


def rare_categories(counts: pa.Table, min_frequency: int) -> set[str]:
    if min_frequency <= 1:
        return set()
    import pyarrow.compute as pc

    return set(counts.filter(pc.less(counts["pages"], min_frequency))["category"].to_pylist())


def write_page_pairs(pages: Iterable[tuple[int, list[str]]], out: str | Path, part: str, options: PairOptions,
                     rare: set[str] | frozenset[str] = frozenset()) -> PairCounts:
    """Pairs of ``pages`` → ``out/part-<part>.parquet``, or, when deduplicating, one file per bucket:
    ``out/bucket-<b>/part-<part>.parquet`` (then :func:`deduplicate_bucket` per bucket)."""
    keep = CategoryFilter(options, rare)
    counts = PairCounts()
    if options.deduplicate:
        writers = [_BufferedParquet(storage.join(out, f"bucket-{b:04d}", f"part-{part}.parquet"), PAIR_SCHEMA,
                                    options.write_rows) for b in range(options.buckets)]
    else:
        writers = [_BufferedParquet(storage.join(out, f"part-{part}.parquet"), PAIR_SCHEMA, options.write_rows)]
    for page_id, categories in pages:
        counts.pages += 1
        kept = keep(categories or ())
        pairs = page_pairs(page_id, kept, options.max_pairs_per_page, options.seed)
        if not pairs:
            continue
        counts.pages_with_pairs += 1
        n = len(kept)
        counts.pages_capped += int(len(pairs) < n * (n - 1) // 2)
        counts.pairs += len(pairs)
        for anchor, positive in pairs:
            if options.deduplicate:
                if positive < anchor:
                    anchor, positive = positive, anchor
                writers[bucket_of(anchor, positive, options.buckets)].append(anchor, positive, page_id)
            else:
                writers[0].append(anchor, positive, page_id)
    for writer in writers:
        writer.close()
    counts.categories_dropped_by_pattern = sum(keep.dropped_by_pattern.values())
    counts.categories_dropped_by_frequency = keep.dropped_by_frequency
    return counts


def deduplicate_bucket(bucket_dir: str | Path, out_file: str | Path) -> dict[str, int]:
    """One row per distinct pair of a bucket (smallest page id kept), sorted; returns rows in and out."""
    files = [f for f in storage.list_files(bucket_dir, ".parquet") if storage.name(f).startswith("part-")]
    table = pa.concat_tables([storage.read_parquet(f) for f in files]) if files else PAIR_SCHEMA.empty_table()
    rows_in = table.num_rows
    unique = table.group_by(["anchor", "positive"]).aggregate([("page_id", "min")])
    unique = unique.rename_columns(["anchor", "positive", "page_id"]).select(PAIR_SCHEMA.names)
    unique = unique.sort_by([("anchor", "ascending"), ("positive", "ascending")]).cast(PAIR_SCHEMA)
    storage.write_parquet(unique, out_file)
    return {"rows_in": rows_in, "rows_out": unique.num_rows}


@dataclass
class PairStageResult:
    counts: PairCounts
    pairs_written: int
    files: list[str] = field(default_factory=list)


def build_pairs(pages_files: list[str | Path], out: str | Path, options: PairOptions,
                work_dir: str | Path | None = None) -> PairStageResult:
    """The whole pair stage in one process (the plain baseline of the Ray Data pipeline, same functions)."""
    out = Path(out)
    work = Path(work_dir) if work_dir is not None else out.parent / (out.name + "_buckets")
    rare: set[str] = set()
    if options.min_category_frequency > 1:
        counts = count_categories(p for f in pages_files for p in iter_page_categories(f))
        rare = {c for c, n in counts.items() if n < options.min_category_frequency}
    total = PairCounts()
    for i, pages_file in enumerate(pages_files):
        total.merge(write_page_pairs(iter_page_categories(pages_file), work if options.deduplicate else out,
                                     f"{i:05d}", options, rare))
    if not options.deduplicate:
        files = sorted(str(p) for p in out.glob("part-*.parquet"))
        return PairStageResult(total, total.pairs, files)
    written, files = 0, []
    for b in range(options.buckets):
        target = out / f"part-{b:05d}.parquet"
        written += deduplicate_bucket(work / f"bucket-{b:04d}", target)["rows_out"]
        files.append(str(target))
    return PairStageResult(total, written, files)
