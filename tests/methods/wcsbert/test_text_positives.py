"""Text–text positives: two word spans of one kept text, two kept texts of one pseudo-label."""

import numpy as np
import pytest

from contrastext.config import load_config
from contrastext.methods.wcsbert.config import WCSBertConfig
from contrastext.methods.wcsbert.pseudo_labels import PseudoLabels
from contrastext.methods.wcsbert.text_positives import TextPositivesConfig, text_positive_pairs, two_crops

TEXTS = [" ".join(f"w{i}_{j}" for j in range(10 + i)) for i in range(8)] + ["too short to crop"]
LABEL = np.array([0, 0, 0, 1, 1, 2, 0, 1, 0], dtype=np.int16)
KEPT = np.array([0, 1, 2, 3, 4, 5, 8])  # items 6 and 7 not kept


def _pseudo() -> PseudoLabels:
    confidence = np.linspace(0.9, 0.1, len(TEXTS))
    return PseudoLabels(label=LABEL, score=confidence, confidence=confidence,
                        alias=np.zeros((len(TEXTS), 3), dtype=np.int64), kept=KEPT)


def _source(span: str) -> int:
    (index,) = [i for i, text in enumerate(TEXTS) if f" {span} " in f" {text} "]
    return index


CROPS_ONLY = TextPositivesConfig(crops=True, crop_share=0.5, same_label=False)


def test_crops_are_two_different_spans_of_one_kept_text():
    pairs = text_positive_pairs(TEXTS, _pseudo(), CROPS_ONLY, seed=3)
    assert len(pairs) == 6  # every kept text but the short one
    for anchor, positive, label in zip(pairs.anchors, pairs.positives, pairs.labels):
        i = _source(anchor)
        assert _source(positive) == i and i in KEPT and label == LABEL[i] and anchor != positive
        assert len(anchor.split()) == len(positive.split()) == round(0.5 * len(TEXTS[i].split()))
    again = text_positive_pairs(TEXTS, _pseudo(), CROPS_ONLY, seed=3)
    other = text_positive_pairs(TEXTS, _pseudo(), CROPS_ONLY, seed=4)
    assert again == pairs and other.anchors != pairs.anchors


def test_same_label_pairs_join_kept_texts_of_one_label_and_never_a_text_with_itself():
    pairs = text_positive_pairs(TEXTS, _pseudo(), TextPositivesConfig(), seed=0)
    # label 0 keeps 0, 1, 2, 8; label 1 keeps 3, 4; label 2 keeps only 5 (no partner)
    assert sorted(TEXTS.index(a) for a in pairs.anchors) == [0, 1, 2, 3, 4, 8]
    for anchor, positive, label in zip(pairs.anchors, pairs.positives, pairs.labels):
        i, j = TEXTS.index(anchor), TEXTS.index(positive)
        assert i != j and j in KEPT and LABEL[i] == LABEL[j] == label
    # a cycle through the label: every kept text of a label is some text's partner once
    assert sorted(TEXTS.index(p) for p in pairs.positives) == [0, 1, 2, 3, 4, 8]


def test_a_cap_keeps_the_most_confident_and_off_gives_nothing():
    config = TextPositivesConfig(crops=True, same_label=True)
    capped = text_positive_pairs(TEXTS, _pseudo(), config, seed=0, max_pairs_per_label=1)
    crops = [a for a, p in zip(capped.anchors, capped.positives) if a not in TEXTS]
    assert sorted({_source(a) for a in crops}) == [0, 3, 5]  # the first kept text of each label
    assert [TEXTS.index(a) for a in capped.anchors if a in TEXTS] == [0, 3]
    assert len(text_positive_pairs(TEXTS, _pseudo(), TextPositivesConfig(same_label=False), seed=0)) == 0
    assert two_crops(["one", "two"], 0.9, np.random.default_rng(0)) is None  # one span only
    assert sorted(two_crops(["one", "two"], 0.5, np.random.default_rng(0))) == ["one", "two"]


def test_only_a_plain_text_pool_has_texts_to_pair():
    for option in ["crops", "same_label"]:
        with pytest.raises(ValueError, match="pool.source=texts"):
            load_config(WCSBertConfig, overrides=["pool.source=wikipedia", f"rounds.text_positives.{option}=true"])
    # same-label pairs are on by default for a plain-text pool, off for a Wikipedia one
    from contrastext.pipelines.wcsbert import method_of

    texts = method_of(load_config(WCSBertConfig)).text_positives
    assert texts.same_label and not texts.crops and texts.enabled
    wikipedia = method_of(load_config(WCSBertConfig, overrides=["pool.source=wikipedia"])).text_positives
    assert wikipedia.same_label is False and not wikipedia.enabled
