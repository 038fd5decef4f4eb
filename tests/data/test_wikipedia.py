"""Dump readers on the real dump samples, a multistream repack of them, malformed dumps and HF page tables."""

import bz2
import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contrastext.data.multistream import repack_as_multistream, split_dump, write_multistream
from contrastext.data.samples import DEFAULT_SAMPLE, TABLE_SAMPLE
from contrastext.data.wikipedia import (Page, ReadStats, Skipped, iter_dump, iter_dump_chunk, iter_table_file,
                                        plan_dump_chunks, read_categories_table, read_multistream_index,
                                        table_files)
from tests.conftest import wikipedia_sample


def _read(path, index=None, **kwargs):
    stats, pages = ReadStats(), []
    for item in iter_dump(path, index, **kwargs):
        stats.add(item)
        if isinstance(item, Page):
            pages.append(item)
    return pages, stats


@pytest.fixture(scope="module")
def sample():
    return wikipedia_sample(DEFAULT_SAMPLE)


@pytest.fixture(scope="module")
def sample_pages(sample):
    return _read(sample)


def test_real_sample_counts(sample_pages):
    pages, stats = sample_pages
    assert stats.pages == len(pages) == 106
    assert dict(stats.skipped) == {"redirect": 100}
    assert sum(len(p.categories) >= 2 for p in pages) == 90
    # 824 distinct names follow [[Category: in the file; one of them is inside an HTML comment
    assert len({c for p in pages for c in p.categories}) == 823
    assert len({p.page_id for p in pages}) == 106


def test_real_sample_text_is_plain(sample_pages):
    pages, _ = sample_pages
    anarchism = next(p for p in pages if p.title == "Anarchism")
    assert anarchism.text.startswith("Anarchism is a political philosophy that advocates self-governed societies")
    assert anarchism.categories[:3] == ["Anarchism", "Political culture", "Political ideologies"]
    for page in pages:
        assert page.text and page.title
        for junk in ("{{", "[[", "<ref", "{|", "&lt;", "Category:"):
            assert junk not in page.text, (page.title, junk)
        assert all("|" not in c and "_" not in c and c[:1] == c[:1].upper() for c in page.categories)


def test_table_markup_sample_has_tables_removed():
    pages, stats = _read(wikipedia_sample(TABLE_SAMPLE))
    assert stats.pages == 5 and not stats.skipped
    for page in pages:
        assert len(page.text) > 500
        assert not any(line.lstrip().startswith(("{|", "|-", "|}", "!")) for line in page.text.splitlines())
        assert "wikitable" not in page.text and "||" not in page.text


def test_multistream_read_in_parallel_chunks_equals_single_stream(sample, tmp_path):
    header, blocks = split_dump(sample)
    blocks = list(blocks)[:80]  # the first 80 real pages (articles and redirects) keep the test quick
    single = tmp_path / "single.xml.bz2"
    single.write_bytes(bz2.compress(header + b"".join(blocks) + b"</mediawiki>\n"))
    out, index = tmp_path / "multistream.xml.bz2", tmp_path / "multistream-index.txt.bz2"
    assert repack_as_multistream(single, out, index, pages_per_stream=10) == 8

    offsets = read_multistream_index(index)
    lines = bz2.open(index, "rt").read().splitlines()
    assert len(offsets) == 8 and len(lines) == 80
    assert lines[0].split(":", 2)[1:] == ["10", "AccessibleComputing"]
    with open(out, "rb") as f:  # every offset starts a bz2 stream
        for offset in offsets:
            f.seek(offset)
            assert f.read(3) == b"BZh"

    chunks = plan_dump_chunks(out, index, streams_per_chunk=3)
    assert len(chunks) == 1 + 3  # the header stream, then 8 streams in runs of 3
    parallel = [item for chunk in reversed(chunks) for item in iter_dump_chunk(chunk)]  # any order works
    expected, expected_stats = _read(single)
    by_id = {p.page_id: p for p in parallel if isinstance(p, Page)}
    assert len(by_id) == expected_stats.pages == 16 and expected_stats.skipped == {"redirect": 64}
    assert sorted(by_id) == sorted(p.page_id for p in expected)
    assert all(by_id[p.page_id] == p for p in expected)
    assert Counter(s.reason for s in parallel if isinstance(s, Skipped)) == expected_stats.skipped


# --------------------------------------------------------------------------- malformed input
def _page(page_id, title, text, ns=0):
    return (f"  <page>\n    <title>{title}</title>\n    <ns>{ns}</ns>\n    <id>{page_id}</id>\n"
            f"    <revision>\n      <id>1</id>\n      <text xml:space=\"preserve\">{text}</text>\n"
            f"    </revision>\n  </page>\n").encode()


HEADER = b'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">\n'
GOOD = "A '''good''' page about [[cats]].\n[[Category:Cats]]\n[[Category:Pets]]"


def test_broken_xml_and_empty_page_skipped_with_reasons(tmp_path):
    broken = (b"  <page>\n    <title>Broken</title>\n    <ns>0</ns>\n    <id>2</id>\n"
              b"    <revision><text>unclosed <b></text></revision>\n  </page>\n")
    empty = (b"  <page>\n    <title>Empty</title>\n    <ns>0</ns>\n    <id>3</id>\n"
             b"    <revision><text xml:space=\"preserve\" /></revision>\n  </page>\n")
    dump = tmp_path / "bad.xml.bz2"
    dump.write_bytes(bz2.compress(HEADER + _page(1, "First", GOOD) + broken + empty
                                  + _page(4, "Talk:Cats", GOOD, ns=1)
                                  + _page(5, "No id", GOOD).replace(b"<id>5", b"<id>x")
                                  + _page(6, "Templates only", "{{Infobox}}{{stub}}")
                                  + b"  <page>\n    <title>Never closed</title>\n"  # next <page> opens inside
                                  + _page(7, "Last", GOOD) + b"</mediawiki>\n"))
    pages, stats = _read(dump)
    assert [p.page_id for p in pages] == [1, 7]
    assert pages[0].text == "A good page about cats." and pages[0].categories == ["Cats", "Pets"]
    assert dict(stats.skipped) == {"xml_error": 2, "empty_text": 1, "namespace": 1, "missing_field": 1,
                                   "empty_after_cleaning": 1}
    assert any("Broken" in e for e in stats.examples["xml_error"])


def test_truncated_bz2_keeps_pages_before_the_cut(tmp_path):
    body = HEADER + b"".join(_page(i, f"Page {i}", GOOD + f" number {i}") for i in range(1, 3001))
    data = bz2.compress(body, compresslevel=1)  # 100 kB blocks: the part before the cut decompresses
    dump = tmp_path / "truncated.xml.bz2"
    dump.write_bytes(data[: len(data) * 2 // 3])
    pages, stats = _read(dump)
    assert 0 < len(pages) < 3000
    assert [p.page_id for p in pages] == list(range(1, len(pages) + 1))  # a prefix, nothing out of order
    assert dict(stats.skipped) == {"truncated_input": 1}


def test_corrupt_stream_in_multistream_loses_only_that_chunk(tmp_path):
    pages_xml = [_page(i, f"Page {i}", GOOD) for i in range(1, 31)]
    out, index = tmp_path / "m.xml.bz2", tmp_path / "m-index.txt.bz2"
    write_multistream(HEADER, pages_xml, out, index, pages_per_stream=10)
    offsets = read_multistream_index(index)
    raw = bytearray(out.read_bytes())
    middle = offsets[1] + (offsets[2] - offsets[1]) // 2
    raw[middle: middle + 16] = b"\x00" * 16  # damage the second stream of pages
    out.write_bytes(bytes(raw))
    parallel = [item for chunk in plan_dump_chunks(out, index, streams_per_chunk=1)
                for item in iter_dump_chunk(chunk)]
    kept = sorted(p.page_id for p in parallel if isinstance(p, Page))
    reasons = Counter(s.reason for s in parallel if isinstance(s, Skipped))
    assert kept[:10] == list(range(1, 11)) and kept[-10:] == list(range(21, 31))
    assert len(kept) < 30 and set(reasons) <= {"corrupt_input", "truncated_input"} and sum(reasons.values()) == 1


def test_missing_dump_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="cannot open Wikipedia dump"):
        list(iter_dump(tmp_path / "nope.xml.bz2"))


def test_bad_index_line_is_a_clear_error(tmp_path):
    index = tmp_path / "index.txt"
    index.write_text("123:4:Title\nnot-an-offset\n")
    with pytest.raises(ValueError, match="index.txt:2"):
        read_multistream_index(index)


def test_split_dump_header_and_pages(sample):
    header, pages = split_dump(sample)
    assert b"<siteinfo>" in header and b"<page>" not in header
    assert sum(1 for _ in pages) == 206


# --------------------------------------------------------------------------- HF page tables
def test_hf_pages_joined_with_categories_by_id_and_by_title(tmp_path):
    pages = pa.table({"id": ["12", "25", "39", "x"], "url": ["u"] * 4,
                      "title": ["Anarchism", "Autism", "Albedo", "Bad"],
                      "text": ["Anarchism is a philosophy.", "Autism is a condition.", "   ", "t"]})
    pages_file = tmp_path / "pages" / "train-00000.parquet"
    pages_file.parent.mkdir()
    pq.write_table(pages, pages_file)
    by_id = tmp_path / "cats.jsonl"
    by_id.write_text("\n".join(json.dumps(r) for r in [
        {"page_id": 12, "categories": ["Anarchism", "political_culture"]},
        {"page_id": 12, "categories": ["Anarchism", "Far-left politics"]},
        {"page_id": 25, "categories": "Autism|Neurological disorders"}]) + "\n")
    stats, rows = ReadStats(), []
    for item in iter_table_file(pages_file, read_categories_table(by_id)):
        stats.add(item)
        if isinstance(item, Page):
            rows.append(item)
    assert [(p.page_id, p.categories) for p in rows] == [
        (12, ["Anarchism", "Political culture", "Far-left politics"]),
        (25, ["Autism", "Neurological disorders"])]
    assert dict(stats.skipped) == {"empty_text": 1, "missing_field": 1}

    by_title = tmp_path / "cats.csv"
    by_title.write_text('title,categories\nAutism,"[""Autism"", ""Communication disorders""]"\n')
    rows = [p for p in iter_table_file(pages_file, read_categories_table(by_title)) if isinstance(p, Page)]
    assert [(p.page_id, p.categories) for p in rows] == [(12, []), (25, ["Autism", "Communication disorders"])]
    assert table_files(tmp_path / "pages") == [str(pages_file)]


def test_categories_table_without_key_column_is_rejected(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"name": "x", "categories": ["A"]}) + "\n")
    with pytest.raises(ValueError, match="'page_id' or 'title'"):
        read_categories_table(bad)
