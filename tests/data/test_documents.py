"""Reading (through load_texts), cleaning, sentence splitting and the two positive-pair builders, on small hand-made inputs."""

import gzip
import json

import numpy as np
import pytest

from contrastext.data.documents import (
    SentenceSplitter,
    clean_text,
    remove_urls_and_emails,
    shuffle_divide_pairs,
    split_units,
    split_words,
    strip_newsgroup_parts,
    tfidf_neighbours,
    tfidf_pairs,
)
from contrastext.data.sources import TextSource, load_texts


def _jsonl(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_jsonl_malformed_rows_are_counted_and_skipped(tmp_path):
    path = _jsonl(tmp_path / "docs.jsonl", [
        json.dumps({"id": "a", "text": "first document", "label": "x"}),
        "{not json",
        json.dumps(["a", "list"]),
        json.dumps({"id": "b", "text": "   ", "label": "x"}),
        json.dumps({"id": "c", "text": 42, "label": "y"}),
        json.dumps({"id": "d", "text": "no label here"}),
        "",
        json.dumps({"id": "e", "text": "second document", "label": 3}),
    ])
    docs = load_texts(TextSource(path=str(path), label_column="label"))
    assert docs.ids == ["a", "e"] and docs.labels == ["x", "3"]
    assert dict(docs.skipped) == {"malformed JSON line": 1, "JSON line is not an object": 1,
                                  "missing or empty text": 2, "missing label": 1}


def test_gzipped_jsonl_titles_and_row_number_ids(tmp_path):
    path = tmp_path / "docs.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"title": "Headline", "body": "Text one."}) + "\n")
        f.write(json.dumps({"title": "Done!", "body": "Text two."}) + "\n")
    docs = load_texts(TextSource(path=str(path), text_columns=["body"], id_column=None, title_column="title"))
    assert docs.ids == ["0", "1"] and docs.labels is None
    assert docs.texts == ["Headline.\n\nText one.", "Done!\n\nText two."]


def test_csv_and_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    csv_path = tmp_path / "docs.csv"
    csv_path.write_text('id,text,label\n1,"hello, world",a\n2,too,many,fields\n3,fine text,b\n', encoding="utf-8")
    docs = load_texts(TextSource(path=str(csv_path), label_column="label"))
    assert docs.ids == ["1", "3"] and docs.texts == ["hello, world", "fine text"]
    assert docs.skipped["CSV row with the wrong number of fields"] == 1

    pq.write_table(pa.table({"id": [7, 8], "text": ["p one", None], "topic": ["t", "u"]}), tmp_path / "d.parquet")
    docs = load_texts(TextSource(path=str(tmp_path / "d.parquet"), label_column="topic"))
    assert docs.ids == ["7"] and docs.labels == ["t"] and docs.skipped["missing or empty text"] == 1


def test_missing_file_column_or_format_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_texts(TextSource(path=str(tmp_path / "nope.jsonl")))
    path = _jsonl(tmp_path / "d.jsonl", [json.dumps({"body": "x"})])
    with pytest.raises(ValueError, match=r"column\(s\) \['text'\] not found"):
        load_texts(TextSource(path=str(path)))
    (tmp_path / "d.xml").write_text("<x/>")
    with pytest.raises(ValueError, match="unknown document format"):
        load_texts(TextSource(path=str(tmp_path / "d.xml")))
    empty = _jsonl(tmp_path / "e.jsonl", [json.dumps({"text": ""})])
    with pytest.raises(ValueError, match="no usable texts"):
        load_texts(TextSource(path=str(empty)))


NEWS_POST = """From: someone@example.edu (Some One)
Subject: Re: engines
Organization: A University
Lines: 12

In article <1993Apr1.123@host.edu> other@host.edu writes:
> The old engine was better, I am quite sure.
> Everybody agrees.

I disagree with that claim about the engine. The new engine has more power and uses less fuel, see
http://example.com/engines or write to me at someone@example.edu for the figures.

--
Some One, Dept. of Engines
"""


def test_newsgroup_cleaning_removes_headers_quotes_signature_urls_and_emails():
    cleaned = clean_text(NEWS_POST, "newsgroups")
    assert "Subject" not in cleaned and "Organization" not in cleaned
    assert "old engine was better" not in cleaned and "writes:" not in cleaned
    assert "Dept. of Engines" not in cleaned
    assert "http" not in cleaned and "@" not in cleaned
    assert cleaned.startswith("I disagree with that claim")
    assert strip_newsgroup_parts(NEWS_POST).count("http://example.com") == 1  # URLs go in the next step


def test_basic_cleaning_keeps_paragraphs_and_drops_short_documents(tmp_path):
    assert remove_urls_and_emails("see www.x.org/a?b=1 or mail a.b+c@d.co.uk now").split() == ["see", "or",
                                                                                                  "mail", "now"]
    assert clean_text("a  b\t c\n\n\n\nd   e") == "a b c\n\nd e"
    path = _jsonl(tmp_path / "d.jsonl", [json.dumps({"id": "1", "text": "one two three four five six seven eight nine ten",
                                                     "label": "a"}),
                                         json.dumps({"id": "2", "text": "only https://x.org five words here",
                                                     "label": "b"})])
    cleaned = load_texts(TextSource(path=str(path), label_column="label", cleaning="basic", min_words=10))
    assert cleaned.ids == ["1"] and cleaned.labels == ["a"]
    assert cleaned.skipped["fewer than 10 words after cleaning"] == 1


def test_sentence_splitter_respects_abbreviations_and_paragraphs():
    splitter = SentenceSplitter()
    sentences = splitter.split("Mr. Smith went to Washington. He met Dr. Jones at 3.30 p.m. on Friday! "
                               "Was it good? Yes.\n\nA heading without a full stop\n\nLast line here.")
    assert sentences == ["Mr. Smith went to Washington.", "He met Dr. Jones at 3.30 p.m. on Friday!",
                         "Was it good?", "Yes.", "A heading without a full stop", "Last line here."]
    assert splitter.split_many(["One. Two.", "", "Three."]) == [["One.", "Two."], [], ["Three."]]


def test_shuffle_divide_halves_partition_the_sentences_and_reshuffle_per_epoch():
    docs = [[f"d{d} s{i}." for i in range(n)] for d, n in enumerate([3, 4, 9, 12])]
    pairs = shuffle_divide_pairs(docs, epoch=1, seed=5, ids=["a", "b", "c", "d"])
    assert [p["id"] for p in pairs] == ["b", "c", "d"]  # 3 sentences are too few
    for pair, doc in zip(pairs, docs[1:]):
        anchor, positive = pair["anchor"].split(" "), pair["positive"].split(" ")
        # each sentence "dX sY." is two tokens
        halves = [" ".join(anchor[i:i + 2]) for i in range(0, len(anchor), 2)], \
                 [" ".join(positive[i:i + 2]) for i in range(0, len(positive), 2)]
        assert sorted(halves[0] + halves[1]) == sorted(doc)
        assert len(halves[0]) == len(doc) // 2
    assert shuffle_divide_pairs(docs, epoch=1, seed=5) == [dict(p, id=str(i + 1)) for i, p in enumerate(pairs)]
    other = shuffle_divide_pairs(docs, epoch=2, seed=5)
    assert [p["anchor"] for p in other] != [p["anchor"] for p in pairs]
    with pytest.raises(ValueError, match="min_units"):
        shuffle_divide_pairs(docs, epoch=0, min_units=1)


def test_pairs_carry_each_documents_group():
    docs = [[f"d{d} s{i}." for i in range(n)] for d, n in enumerate([3, 4, 9, 12])]
    pairs = shuffle_divide_pairs(docs, epoch=1, seed=5, groups=[7, 0, 1, 0])
    assert [p["group"] for p in pairs] == [0, 1, 0]  # document 0 is too short and its group goes with it
    without = shuffle_divide_pairs(docs, epoch=1, seed=5)
    assert [{k: v for k, v in p.items() if k != "group"} for p in pairs] == without
    texts = ["apples and pears", "pears and apples", "stock market falls", "market stock rises"]
    tfidf = tfidf_pairs(texts, tfidf_neighbours(texts), groups=[2, 2, 5, 5])
    assert [p["group"] for p in tfidf] == [2, 2, 5, 5]
    with pytest.raises(ValueError, match="one per document"):
        shuffle_divide_pairs(docs, epoch=1, groups=[0, 1])


def test_word_halves_sample_the_whole_document():
    text = " ".join(f"w{i:03d}" for i in range(400))
    units = split_units([text, "too short"], "word")
    assert units == split_words([text, "too short"]) and len(units[0]) == 400
    (pair,) = shuffle_divide_pairs(units, epoch=3, seed=1, min_units=4)
    anchor, positive = pair["anchor"].split(), pair["positive"].split()
    assert len(anchor) == len(positive) == 200 and sorted(anchor + positive) == units[0]
    # a truncated half (its first 60 words) still draws from every part of the document, not its opening
    quarters = {int(word[1:]) // 100 for word in anchor[:60]}
    assert quarters == {0, 1, 2, 3}
    assert shuffle_divide_pairs(units, epoch=4, seed=1)[0]["anchor"] != pair["anchor"]


def test_sentence_units_come_from_the_sentence_splitter():
    texts = ["Mr. Smith went to Washington. He met Dr. Jones. They talked. It rained."]
    assert split_units(texts, "sentence") == SentenceSplitter().split_many(texts)
    with pytest.raises(ValueError, match="unknown shuffle unit"):
        split_units(texts, "paragraph")


def _dense_nearest(texts):
    from sklearn.feature_extraction.text import TfidfVectorizer

    m = TfidfVectorizer(sublinear_tf=True, stop_words="english", min_df=1).fit_transform(texts).toarray()
    sim = m @ m.T
    np.fill_diagonal(sim, -np.inf)
    return sim.argmax(axis=1), sim.max(axis=1)


TOPICS = {
    "sport": "football match goal striker league keeper penalty stadium referee season",
    "space": "rocket orbit launch satellite astronaut moon telescope planet mission gravity",
    "food": "recipe flour butter oven bake sugar dough kitchen pastry chocolate",
}


def _topic_texts(per=8, seed=0):
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for label, words in TOPICS.items():
        vocab = words.split()
        for _ in range(per):
            texts.append(" ".join(rng.choice(vocab, size=12)))
            labels.append(label)
    return texts, labels


def test_tfidf_neighbours_match_the_dense_computation_in_any_chunking():
    texts, labels = _topic_texts()
    expected, expected_similarity = _dense_nearest(texts)
    for chunk in (1, 5, 1024):
        result = tfidf_neighbours(texts, labels=labels, chunk_rows=chunk, min_df=1)
        np.testing.assert_array_equal(result.neighbour, expected)
        assert np.all(result.neighbour != np.arange(len(texts)))
    assert result.label_agreement == 1.0  # disjoint vocabularies
    np.testing.assert_allclose(result.similarity, expected_similarity, rtol=1e-5, atol=1e-6)
    pairs = tfidf_pairs(texts, result)
    assert pairs[0] == {"anchor": texts[0], "positive": texts[expected[0]], "id": "0"}


def test_tfidf_label_agreement_counts_mismatches():
    texts = ["alpha beta gamma", "alpha beta gamma delta", "zeta eta theta", "zeta eta theta iota"]
    result = tfidf_neighbours(texts, labels=["a", "b", "c", "c"], min_df=1)
    assert result.label_agreement == pytest.approx(0.5)
    assert tfidf_neighbours(texts, min_df=1).label_agreement is None
    with pytest.raises(ValueError, match="at least two"):
        tfidf_neighbours(["one"])
