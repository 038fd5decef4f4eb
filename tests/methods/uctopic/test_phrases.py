"""Phrase instances from CoNLL files, Wikipedia link spans and documents; positive pairs; sentence offsets."""

import math
import random

import pytest

from contrastext.methods.uctopic.candidates import (
    NgramExtractor,
    NgramSettings,
    available_spacy_model,
    document_phrases,
)
from contrastext.methods.uctopic.phrases import (
    ConllStats,
    OffsetSentenceSplitter,
    PairStats,
    PhraseInstance,
    pair_row,
    positive_pairs,
    read_conll_entities,
    wiki_link_instances,
)

CONLL = """-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
to TO I-VP O
boycott VB I-VP O
British JJ I-NP I-MISC
lamb NN I-NP O
. . O O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER
in IN I-PP O
New NNP I-NP B-LOC
York NNP I-NP I-LOC
Boston NNP I-NP B-LOC
broken
Smith NNP I-NP WEIRD
"""


def test_conll_entities_follow_iob1_with_spans_over_the_space_joined_tokens(tmp_path):
    path = tmp_path / "mini.conll"
    path.write_text(CONLL)
    stats = ConllStats()
    found = read_conll_entities(path, stats=stats)
    assert [(e.phrase, e.label) for e in found] == [
        ("EU", "ORG"), ("German", "MISC"), ("British", "MISC"), ("Peter Blackburn", "PER"),
        ("New York", "LOC"), ("Boston", "LOC")]  # B- splits two adjacent LOC entities
    assert found[3].sentence.startswith("Peter Blackburn in New York Boston")
    assert found[3].key == "peter blackburn" and stats.sentences == 2
    assert stats.skipped == {"line with fewer than 2 columns": 1, "unknown NER tag": 1}
    kept = read_conll_entities(path, ["PER", "LOC"])
    assert {e.label for e in kept} == {"PER", "LOC"} and len(kept) == 3


def test_conll_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_conll_entities(tmp_path / "missing")
    path = tmp_path / "mini.conll"
    path.write_text(CONLL)
    with pytest.raises(ValueError, match="no entities of types"):
        read_conll_entities(path, ["DATE"])


def test_sentence_splitter_keeps_document_offsets():
    text = "First sentence here.  Second one follows!\n\nA new paragraph starts. And ends"
    sentences = OffsetSentenceSplitter().split(text)
    assert [s.text for s in sentences] == ["First sentence here.", "Second one follows!",
                                           "A new paragraph starts.", "And ends"]
    assert all(text[s.start:s.end] == s.text for s in sentences)


def test_wiki_link_instances_map_link_spans_into_their_sentences():
    text = "Paris is the capital of France. The Seine flows through Paris to the sea.\n\nSee also"
    links = [{"target": "paris", "start": 0, "end": 5}, {"target": "France", "start": 24, "end": 30},
             {"target": "Paris", "start": 56, "end": 61},
             {"target": "Bad", "start": 70, "end": 200},  # outside the text: ignored
             {"target": "See", "start": 75, "end": 78}]  # a heading-like fragment: too short a sentence
    found = list(wiki_link_instances([{"text": text, "links": links}]))
    assert [(i.phrase, i.key) for i in found] == [("Paris", "Paris"), ("France", "France"), ("Paris", "Paris")]
    assert found[2].sentence == "The Seine flows through Paris to the sea."
    assert found[2].offset + found[2].start == 56


def _inst(sentence: str, phrase: str, key: str) -> PhraseInstance:
    start = sentence.index(phrase)
    return PhraseInstance(sentence, start, start + len(phrase), key=key)


def test_positive_pairs_join_different_sentences_of_one_target_and_mask_mentions():
    instances = [_inst(f"Sentence {i} mentions Paris today.", "Paris", "Paris") for i in range(4)]
    instances += [_inst("The city of Lyon is old.", "Lyon", "Lyon"), _inst("The city of Lyon is old.", "Lyon", "Lyon")]
    stats = PairStats()
    rows = positive_pairs(instances, keep_probability=0.5, max_pairs_per_key=3, by_mention=False, seed=0,
                          stats=stats)
    assert len(rows) == 3 and stats.keys_with_pairs == 1  # Lyon's two mentions share their sentence
    for row in rows:
        assert row["anchor"] != row["positive"] and row["key"] == "target:Paris" and row["topic"] == -1
        assert row["anchor"][row["anchor_start"]:row["anchor_end"]] == "Paris"
        assert row["anchor_mask"] or row["positive_mask"]  # at most one mention kept visible


def test_keep_probability_controls_how_often_a_mention_stays_visible():
    rng = random.Random(0)
    a, b = _inst("A mentions Paris.", "Paris", "P"), _inst("B mentions Paris.", "Paris", "P")
    rows = [pair_row(a, b, rng, 0.5, group="g") for _ in range(2000)]
    visible = sum(not (r["anchor_mask"] and r["positive_mask"]) for r in rows) / len(rows)
    assert 0.45 < visible < 0.55
    assert all(pair_row(a, b, rng, 0.0, group="g")["anchor_mask"] for _ in range(50))


def test_ngram_fallback_finds_collocations_without_stop_word_edges():
    sentences = ["The Premier League title race is open.", "Chelsea lead the Premier League again.",
                 "Arsenal chase the Premier League leaders.", "The title of the book is long."] * 2
    extractor = NgramExtractor(NgramSettings(min_count=2)).fit(sentences)
    assert ("premier", "league") in extractor.vocabulary
    assert not any(g[0] in extractor.stop or g[-1] in extractor.stop for g in extractor.vocabulary)
    spans = extractor.find("Chelsea lead the Premier League again.")
    found = ["Chelsea lead the Premier League again."[s:e] for s, e in spans]
    assert "Premier League" in found and "Premier" not in found  # the longest match wins


def test_ngram_scores_are_count_times_one_plus_npmi_over_all_words_of_the_gram():
    sentences = ["Manchester United fans sang loudly.", "Manchester United fans waited outside.",
                 "United fans cheered, Manchester slept.", "Fans of Manchester United travelled."] * 2
    extractor = NgramExtractor(NgramSettings(min_count=2, min_npmi=0.0)).fit(sentences)
    words = [w.lower().strip(".,") for s in sentences for w in s.split()]
    total, count = len(words), {w: words.count(w) for w in set(words)}

    def score(gram: tuple[str, ...], gram_count: int) -> float:
        p_gram = gram_count / total
        p_words = math.prod(count[w] / total for w in gram)
        return gram_count * (1 + math.log(p_gram / p_words) / (-math.log(p_gram) * (len(gram) - 1)))

    assert extractor.vocabulary[("manchester", "united")] == pytest.approx(score(("manchester", "united"), 6))
    # three words with no stop word inside, scored as one gram (a bigram phrase model joins only pairs)
    assert extractor.vocabulary[("manchester", "united", "fans")] == pytest.approx(
        score(("manchester", "united", "fans"), 4))
    assert ("cheered", "manchester") not in extractor.vocabulary  # a comma breaks the n-gram


def test_document_phrases_use_the_ngram_fallback_without_a_spacy_model():
    assert not available_spacy_model("no_such_model_package")
    docs = ["Interest rates rose. The central bank raised interest rates again.",
            "Markets fell after the central bank decision on interest rates."]
    found, used = document_phrases(docs, extractor="ngram")
    assert used == "ngram"
    for inst in found:
        assert docs[inst.document][inst.offset + inst.start: inst.offset + inst.end] == inst.phrase
    assert {"interest rates", "central bank"} <= {i.key for i in found}
    with pytest.raises(ValueError, match="needs the spaCy model package"):
        document_phrases(docs, extractor="spacy", spacy_model="no_such_model_package")
