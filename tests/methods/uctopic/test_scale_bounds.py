"""Memory of the UCTopic pretraining inputs stays bounded as the corpus grows: pages read up to max_pages,
pairs of a frequent link target drawn without listing all of them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import pytest
from uctopic_data import peak_traced_bytes

from contrastext.methods.uctopic import sources
from contrastext.methods.uctopic.config import PretrainSettings
from contrastext.methods.uctopic.phrases import PairStats, PhraseInstance, positive_pairs
from contrastext.methods.uctopic.sources import iter_wiki_pages

_FILLER = "The river runs past the old mill and the long bridge near the town square. " * 4


def _write_pages(path: Path, count: int) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [f"Page {i} is about Paris. {_FILLER}" for i in range(count)]
    links = [[{"target": "Paris", "start": len(f"Page {i} is about "), "end": len(f"Page {i} is about Paris")}]
             for i in range(count)]
    pq.write_table(pa.table({"text": texts, "links": links}), path, row_group_size=500)
    return str(path)


@pytest.fixture(scope="module")
def page_files(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("pages")
    return {"warm": _write_pages(folder / "warm.parquet", 600), "small": _write_pages(folder / "small.parquet", 2_000),
            "large": _write_pages(folder / "large.parquet", 20_000)}




def _read_pages(pages: str, max_pages: int | None, take: int | None = None) -> list:
    rows, _ = iter_wiki_pages(PretrainSettings(pages=pages, max_pages=max_pages))
    return list(islice(rows, take))


def test_pages_table_rows_come_from_an_iterator_cut_at_max_pages(page_files):
    rows, source = iter_wiki_pages(PretrainSettings(pages=page_files["small"], max_pages=30))
    assert isinstance(rows, Iterator) and not isinstance(rows, list) and source == page_files["small"]
    read = list(rows)
    assert len(read) == 30 and read[3]["text"].startswith("Page 3 is about Paris.")
    assert read[3]["links"] == [{"target": "Paris", "start": 16, "end": 21}]


def test_pages_table_is_read_only_up_to_max_pages(page_files, monkeypatch):
    pulled = 0
    batches = sources._table_batches

    def counting(*args, **kwargs):
        nonlocal pulled
        for batch in batches(*args, **kwargs):
            pulled += batch.num_rows
            yield batch

    monkeypatch.setattr(sources, "_table_batches", counting)
    assert len(_read_pages(page_files["large"], max_pages=40)) == 40
    assert pulled <= 80  # of 20,000 rows in the file
    pulled = 0
    assert len(_read_pages(page_files["large"], max_pages=None, take=10)) == 10
    assert pulled <= 2 * sources._PAGE_BATCH_ROWS


@pytest.mark.parametrize("max_pages, take", [(50, None), (None, 50)])
def test_reading_pages_takes_no_more_memory_from_a_ten_times_larger_table(page_files, max_pages, take):
    _read_pages(page_files["warm"], max_pages, take)  # imports and first-use caches outside the measurements
    small = peak_traced_bytes(lambda: _read_pages(page_files["small"], max_pages, take))
    large = peak_traced_bytes(lambda: _read_pages(page_files["large"], max_pages, take))
    assert large <= 1.5 * small + 256 * 1024, (small, large)


# ------------------------------------------------------------------------------------------- pairs

def _mentions(count: int, key: str = "Paris") -> list[PhraseInstance]:
    return [PhraseInstance(f"Sentence {i} is about {key}.", len(f"Sentence {i} is about "),
                           len(f"Sentence {i} is about {key}"), key=key) for i in range(count)]


def _pair_indices(rows: list[dict], instances: list[PhraseInstance]) -> list[tuple[int, int]]:
    position = {inst.sentence: i for i, inst in enumerate(instances)}
    return [(position[r["anchor"]], position[r["positive"]]) for r in rows]


def test_a_frequent_target_keeps_the_cap_without_listing_all_its_pairs():
    instances = _mentions(2_000)  # about two million possible pairs
    stats = PairStats()
    rows: list[dict] = []
    peak = peak_traced_bytes(lambda: rows.extend(positive_pairs(instances, max_pairs_per_key=20, by_mention=False,
                                                          seed=0, stats=stats)))
    assert len(rows) == 20 and stats.keys_with_pairs == 1 and stats.by_source["target"] == 20
    assert peak < 4 * 1024 * 1024, peak  # listing every pair takes well over 100 MB
    pairs = _pair_indices(rows, instances)
    # each pair once, its two mentions in one order (by sentence) whatever the order of the input
    assert len(set(pairs)) == len(pairs) and all(instances[a].sentence < instances[b].sentence for a, b in pairs)


def test_pairs_are_the_same_under_a_seed_and_differ_across_seeds():
    instances = _mentions(300)
    first = positive_pairs(instances, seed=7, max_pairs_per_key=20)
    assert first == positive_pairs(instances, seed=7, max_pairs_per_key=20)
    assert _pair_indices(first, instances) != _pair_indices(positive_pairs(instances, seed=8, max_pairs_per_key=20),
                                                            instances)


def test_a_key_with_fewer_pairs_than_the_cap_keeps_them_all_once():
    instances = _mentions(4)
    instances.append(PhraseInstance(instances[0].sentence, 0, len("Sentence"), key="Paris"))
    # 5 mentions, two in one sentence: 10 pairs less the one inside that sentence; the anchor-text group of
    # "paris" (drawn first) holds 6 of them, which the target group does not take again
    rows = positive_pairs(instances, max_pairs_per_key=20, by_mention=True, seed=0)
    pairs = {(r["anchor"], r["anchor_start"], r["positive"], r["positive_start"]) for r in rows}
    assert len(rows) == len(pairs) == 9 and all(a != b for a, _, b, _ in pairs)
    assert Counter(r["key"] for r in rows) == {"mention:paris": 6, "target:Paris": 3}
