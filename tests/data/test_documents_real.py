"""Loading, cleaning, splitting and TF-IDF pairing on the real BBCSport and 20 Newsgroups files."""

import re

import numpy as np
import pytest

from contrastext.data.documents import SentenceSplitter, tfidf_neighbours
from contrastext.data.sources import TextSource, load_texts

from conftest import shared_data

pytestmark = pytest.mark.integration


def test_bbcsport_loads_whole_with_titles_and_long_documents():
    source = TextSource(path=str(shared_data("bbcsport/bbcsport.jsonl")), label_column="label", title_column="title")
    docs = load_texts(source)
    assert len(docs) == 737 and not docs.skipped
    assert sorted(set(docs.labels)) == ["athletics", "cricket", "football", "rugby", "tennis"]
    docs = load_texts(source.model_copy(update={"cleaning": "basic", "min_words": 10}))
    assert len(docs) == 737
    sentences = SentenceSplitter().split_many(docs.texts[:50])
    assert all(len(s) >= 4 for s in sentences)
    assert sentences[0][0] == "Claxton hunting first major medal."  # the title is the first sentence


def test_bbcsport_tfidf_neighbours_nearly_always_share_the_sport():
    docs = load_texts(TextSource(path=str(shared_data("bbcsport/bbcsport.jsonl")), label_column="label"))
    result = tfidf_neighbours(docs.texts, labels=docs.labels, chunk_rows=100)
    assert result.label_agreement > 0.9  # five sports with very distinct vocabularies
    assert np.all(result.neighbour != np.arange(len(docs)))


def test_newsgroups_cleaning_on_the_test_set():
    source = TextSource(path=str(shared_data("20newsgroups/20ng_bydate_test.jsonl.gz")), label_column="label")
    raw = load_texts(source)
    assert len(raw) == 7532 and len(set(raw.labels)) == 20
    docs = load_texts(source.model_copy(update={"cleaning": "newsgroups", "min_words": 10}))
    dropped = docs.skipped["fewer than 10 words after cleaning"]
    assert 0 < dropped < 0.1 * len(raw) and len(docs) + dropped == len(raw)
    assert all(len(t.split()) >= 10 for t in docs.texts)
    # the header block is gone; a second header block, a forwarded message or an indented quote inside a
    # body stays, as with scikit-learn's remove=("headers", "footers", "quotes")
    headers = re.compile(r"^(From|Subject|Organization|Lines):", re.MULTILINE)
    assert sum(bool(headers.match(t)) for t in docs.texts) < 0.01 * len(docs)
    assert sum(bool(headers.search(t)) for t in docs.texts) < 0.02 * len(docs)
    assert sum(any(line.startswith(">") for line in t.splitlines()) for t in docs.texts) < 0.02 * len(docs)
    assert not any(re.search(r"[\w.+-]+@[\w-]+\.\w", t) for t in docs.texts)


def test_newsgroups_tfidf_pairs_mostly_share_the_group():
    docs = load_texts(TextSource(path=str(shared_data("20newsgroups/20ng_bydate_test.jsonl.gz")), label_column="label",
                                 cleaning="newsgroups", min_words=10))
    result = tfidf_neighbours(docs.texts, labels=docs.labels)
    # 20 groups, some very close (five computing groups, three religion ones); chance is about 5%
    assert result.label_agreement > 0.6
