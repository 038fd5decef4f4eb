"""Category pairs: all unordered pairs, filters, per-page cap, corpus-wide deduplication, streaming files."""

from itertools import combinations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contrastext.data.pairs import (PAIR_SCHEMA, CategoryFilter, PairOptions, _unrank, build_pairs, bucket_of,
                                    page_pairs)


def _pages_file(path, pages):
    table = pa.table({"page_id": [p for p, _ in pages], "title": [f"t{p}" for p, _ in pages],
                      "text": ["x"] * len(pages), "categories": [c for _, c in pages]},
                     schema=pa.schema([("page_id", pa.int64()), ("title", pa.string()), ("text", pa.string()),
                                       ("categories", pa.list_(pa.string()))]))
    pq.write_table(table, path, row_group_size=2)
    return path


def _read(files):
    tables = [pq.read_table(f) for f in files]
    return pa.concat_tables(tables).to_pylist() if tables else []


def test_all_unordered_pairs_in_page_order():
    assert page_pairs(1, ["A", "B", "C"]) == [("A", "B"), ("A", "C"), ("B", "C")]
    assert page_pairs(1, ["A"]) == [] and page_pairs(1, []) == []
    assert len(page_pairs(7, [f"c{i}" for i in range(70)])) == 2415


def test_cap_is_a_deterministic_sample_without_repeats():
    cats = [f"c{i}" for i in range(70)]
    capped = page_pairs(7, cats, max_pairs=100, seed=3)
    assert len(capped) == len(set(capped)) == 100
    assert capped == page_pairs(7, cats, max_pairs=100, seed=3)
    assert capped != page_pairs(8, cats, max_pairs=100, seed=3)  # seeded per page
    assert set(capped) <= set(combinations(cats, 2))


def test_unrank_enumerates_combinations():
    for n in (2, 5, 9):
        assert [_unrank(k, n) for k in range(n * (n - 1) // 2)] == list(combinations(range(n), 2))


def test_filter_patterns_and_rare_categories():
    keep = CategoryFilter(PairOptions(), rare={"Rare one"})
    cats = ["Cats", "Articles with short description", "All stub articles", "Use dmy dates from May 2020",
            "Rare one", "Mammal stubs", "Cats", "Pets"]
    assert keep(cats) == ["Cats", "Pets"]
    assert keep.dropped_by_frequency == 1 and sum(keep.dropped_by_pattern.values()) == 4
    custom = CategoryFilter(PairOptions(exclude_patterns=[r"^p"]))
    assert custom(["Pets", "Cats"]) == ["Cats"]  # case-insensitive


def test_bucket_is_stable_across_processes():
    # crc32 of "a\x1fb": a fixed number, unlike hash() which is salted per process
    assert bucket_of("a", "b", 1_000_003) == 3635574511 % 1_000_003


@pytest.mark.parametrize("deduplicate", [True, False])
def test_build_pairs_from_page_files(tmp_path, deduplicate):
    pages = [(1, ["B", "A", "C"]), (2, ["A", "B"]), (3, ["Solo"]), (4, ["C", "B", "Mammal stubs"]), (5, None)]
    files = [_pages_file(tmp_path / "p0.parquet", pages[:3]), _pages_file(tmp_path / "p1.parquet", pages[3:])]
    result = build_pairs(files, tmp_path / "pairs", PairOptions(deduplicate=deduplicate, buckets=3))
    rows = _read(result.files)
    assert pq.read_schema(result.files[0]) == PAIR_SCHEMA
    assert result.counts.pages == 5 and result.counts.pages_with_pairs == 3
    assert result.counts.pairs == 3 + 1 + 1 and result.counts.categories_dropped_by_pattern == 1
    if deduplicate:  # alphabetical orientation, smallest page id kept
        assert sorted((r["anchor"], r["positive"], r["page_id"]) for r in rows) == [
            ("A", "B", 1), ("A", "C", 1), ("B", "C", 1)]
        assert result.pairs_written == 3
    else:  # page order kept, every page's pairs
        assert sorted((r["anchor"], r["positive"], r["page_id"]) for r in rows) == sorted(
            [("B", "A", 1), ("B", "C", 1), ("A", "C", 1), ("A", "B", 2), ("C", "B", 4)])
        assert result.pairs_written == 5


def test_min_category_frequency(tmp_path):
    pages = [(1, ["A", "B", "Once"]), (2, ["A", "B"]), (3, ["B", "A", "Twice"]), (4, ["Twice", "A"])]
    files = [_pages_file(tmp_path / "p.parquet", pages)]
    result = build_pairs(files, tmp_path / "pairs", PairOptions(min_category_frequency=2, buckets=2))
    rows = {(r["anchor"], r["positive"]) for r in _read(result.files)}
    assert rows == {("A", "B"), ("A", "Twice"), ("B", "Twice")}
    assert result.counts.categories_dropped_by_frequency == 1
