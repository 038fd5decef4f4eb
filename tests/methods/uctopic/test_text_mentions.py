"""Phrase mentions of plain text for pretraining: named spans, NPMI phrases, and which contexts pair up."""

import pytest

from contrastext.methods.uctopic.phrases import PhraseInstance, group_pairs
from contrastext.methods.uctopic.text_mentions import document_mentions, fit_phrase_vocabulary, named_spans

DOCUMENTS = [
    "Manchester United beat Arsenal at Old Trafford on Sunday. The Bank of England kept its rate unchanged.",
    "Fans of Manchester United waited for hours in the rain. Prices at the interest rate review were mixed.",
    "Arsenal lost again, and the manager blamed the referee. The interest rate review will follow in May.",
]


def _spans(sentence: str) -> list[str]:
    return [sentence[s:e] for s, e in named_spans(sentence)]


def test_named_spans_are_runs_of_capitalised_words_not_a_capitalised_opener():
    assert _spans("The match at Old Trafford ended when Manchester United scored.") == ["Old Trafford",
                                                                                        "Manchester United"]
    assert _spans("The Bank of England and the Bank raised rates.") == ["Bank of England", "Bank"]
    # a comma ends a name; a lone capitalised first word is an ordinary word
    assert _spans("Yesterday it rained in Paris, France and Rome.") == ["Paris", "France", "Rome"]
    assert _spans("Arsenal won.") == []


def test_npmi_phrases_join_the_named_spans_without_overlapping_them():
    vocabulary = fit_phrase_vocabulary(DOCUMENTS * 3, min_count=2, min_npmi=0.0)
    assert ["interest", "rate", "review"] in vocabulary or ["interest", "rate"] in vocabulary
    found = {(key, sentence) for sentence, _, _, key in document_mentions(
        DOCUMENTS, frozenset(tuple(g) for g in vocabulary))}
    keys = {key for key, _ in found}
    assert {"manchester united", "old trafford", "bank of england"} <= keys
    assert any(key.startswith("interest rate") for key in keys)
    # the first words of sentences are not names: "Arsenal" counts only where it is not the opener
    assert ("arsenal", DOCUMENTS[0].split(". ")[0] + ".") in found
    assert not any(key == "arsenal" and sentence.startswith("Arsenal lost") for key, sentence in found)
    without = {key for _, _, _, key in document_mentions(DOCUMENTS, None)}
    assert not any(key.startswith("interest rate") for key in without)


def test_two_contexts_of_one_phrase_pair_up_and_are_masked():
    instances = [PhraseInstance(sentence, start, end, key=key)
                 for sentence, start, end, key in document_mentions(DOCUMENTS, None)]
    united = [inst for inst in instances if inst.key == "manchester united"]
    assert len(united) == 2 and united[0].sentence != united[1].sentence
    rows = group_pairs("target:manchester united", united, seed=0, keep_probability=0.0, max_pairs_per_key=5)
    assert len(rows) == 1
    row = rows[0]
    assert {row["anchor"], row["positive"]} == {u.sentence for u in united}
    assert row["anchor"][row["anchor_start"]:row["anchor_end"]] == "Manchester United"
    assert row["anchor_mask"] and row["positive_mask"]  # keep probability 0: both mentions masked
    kept = group_pairs("target:manchester united", united, seed=0, keep_probability=1.0, max_pairs_per_key=5)[0]
    assert kept["anchor_mask"] != kept["positive_mask"]  # one of the two stays visible
    # a phrase seen once has no partner
    once = [inst for inst in instances if inst.key == "old trafford"]
    assert group_pairs("target:old trafford", once, seed=0, keep_probability=0.5, max_pairs_per_key=5) == []


@pytest.mark.parametrize("sentence", ["", "no capitals here at all"])
def test_no_names_no_spans(sentence):
    assert named_spans(sentence) == []
