"""UCTopic pretraining pairs built with Ray Data: the rows of the in-process builder, whatever the partitioning,
and a driver whose memory does not grow with the pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrastext.methods.uctopic.config import PretrainSettings
from contrastext.methods.uctopic.phrases import positive_pair_dataset, positive_pairs, wiki_link_instances
from contrastext.methods.uctopic.sources import wiki_pages_dataset

pytestmark = pytest.mark.ray

_TARGETS = ["Paris", "Berlin", "Cairo", "Lima", "Oslo"]
_FILLER = "The river runs past the old mill and the long bridge near the town square."


def _pages(count: int, targets: list[str] = _TARGETS) -> list[dict]:
    """Pages of two sentences, each linking a target; some anchors are the target's name, some are not, and
    some pages repeat an earlier page's text."""
    pages = []
    for i in range(count):
        target, other = targets[i % len(targets)], targets[(i * 3 + 1) % len(targets)]
        anchor = target if i % 3 else "the city"
        first = f"Page {i % 40} is about {anchor} and its people."
        second = f"{_FILLER} Later it names {other} once more."
        text = f"{first} {second}"
        start = first.index(anchor)
        second_start = text.index(other, len(first))
        pages.append({"text": text, "links": [
            {"target": target, "start": start, "end": start + len(anchor)},
            {"target": other, "start": second_start, "end": second_start + len(other)}]})
    return pages


def _write_parquet(pages: list[dict], path: Path) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(pages), path, row_group_size=25)
    return str(path)


def _as_set(rows: list[dict]) -> set[tuple]:
    return {tuple(sorted(row.items())) for row in rows}


@pytest.mark.parametrize("by_mention", [True, False])
def test_ray_data_pairs_equal_the_in_process_pairs_whatever_the_blocks(ray_session, tmp_path, by_mention):
    pages = _pages(120)
    options = {"keep_probability": 0.5, "max_pairs_per_key": 4, "by_mention": by_mention, "seed": 3}
    instances = list(wiki_link_instances(pages))
    expected = positive_pairs(instances, **options)
    assert len(expected) == len(_as_set(expected))
    assert {r["key"].split(":")[0] for r in expected} == ({"target", "mention"} if by_mention else {"target"})

    table, _ = wiki_pages_dataset(PretrainSettings(pages=_write_parquet(pages, tmp_path / "pages.parquet")))
    for source in (table, ray_session.data.from_items(pages, override_num_blocks=5)):
        built = positive_pair_dataset(source, **options)
        assert isinstance(built.pairs, ray_session.data.Dataset)
        assert built.mentions.count() == len(instances)
        rows = built.pairs.take_all()
        assert len(rows) == len(expected) and _as_set(rows) == _as_set(expected)


def test_a_pair_under_its_target_and_its_anchor_text_is_kept_once_under_the_anchor_text(ray_session):
    texts = [f"Sentence {i} is about Paris today." for i in range(4)]
    pages = [{"text": t, "links": [{"target": "Paris", "start": t.index("Paris"), "end": t.index("Paris") + 5}]}
             for t in texts]
    rows = positive_pair_dataset(ray_session.data.from_items(pages, override_num_blocks=2), seed=0).pairs.take_all()
    # the 6 pairs of 4 mentions of "Paris" linking to Paris: each drawn by both groups, kept once
    assert len(rows) == 6 and {r["key"] for r in rows} == {"mention:paris"}
    assert len({(r["anchor"], r["positive"]) for r in rows}) == 6 and all(r["anchor"] < r["positive"] for r in rows)


def test_pairs_are_the_same_under_a_seed_and_differ_across_seeds(ray_session):
    pages = ray_session.data.from_items(_pages(60), override_num_blocks=3)

    def pairs(seed: int) -> set[tuple]:
        return _as_set(positive_pair_dataset(pages, max_pairs_per_key=2, seed=seed).pairs.take_all())

    assert pairs(1) == pairs(1) and pairs(1) != pairs(2)




def test_pairs_are_built_as_a_dataset_that_grows_with_the_pages_off_the_driver(ray_session, tmp_path):
    # no tracemalloc here: tracing allocations while Ray's own threads run crashes the interpreter
    import ray.data

    files = {n: _write_parquet(_pages(n), tmp_path / f"pages-{n}.parquet") for n in (300, 3_000)}

    def build(count: int) -> ray.data.Dataset:
        pages, _ = wiki_pages_dataset(PretrainSettings(pages=files[count]))
        built = positive_pair_dataset(pages, max_pairs_per_key=4, seed=0)
        assert isinstance(built.pairs, ray.data.Dataset)
        return built.pairs.materialize()  # in Ray's object store, not in a driver-side list

    small, large = build(300).count(), build(3_000).count()
    assert 0 < small <= large  # capped per link target: more pages of the same targets add no pairs


def test_max_pages_reads_the_first_pages_of_the_table(ray_session, tmp_path):
    pages = _pages(200)
    read, source = wiki_pages_dataset(PretrainSettings(pages=_write_parquet(pages, tmp_path / "p.parquet"),
                                                       max_pages=30))
    assert source.endswith("p.parquet")
    assert [r["text"] for r in read.take_all()] == [p["text"] for p in pages[:30]]
