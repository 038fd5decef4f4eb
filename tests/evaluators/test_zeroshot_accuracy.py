from __future__ import annotations

import numpy as np
import pytest

from contrastext.evaluators.zeroshot_accuracy import LabelScheme, ZeroShotEvaluator


class KeywordEncoder:
    """A deterministic encoder: one axis per keyword (and one for "no keyword"), so results are known."""

    words = ["sport", "money", "science", "technology"]

    def encode(self, texts, batch_size=64):
        out = np.zeros((len(texts), len(self.words) + 1), dtype=np.float32)
        for i, text in enumerate(texts):
            for j, word in enumerate(self.words):
                if word in text.lower():
                    out[i, j] += 1.0
            if not out[i].any():
                out[i, -1] = 1.0
        return out


def test_scheme_replaces_or_keeps_the_label():
    scheme = LabelScheme("5 labels", "{label}", {"Sci/Tech": ["Science", "Technology"]}, keep_label=False)
    assert scheme.label_set(["Sports", "Sci/Tech"]).aliases == (("Sports",), ("Science", "Technology"))
    kept = LabelScheme("kept", "{label}", {"Sci/Tech": ["Science"]}, keep_label=True)
    assert kept.label_set(["Sci/Tech"]).aliases == (("Sci/Tech", "Science"),)


def test_accuracy_confusion_and_alias_effect():
    texts = ["sport today", "money talk", "new technology", "science news"]
    gold = [0, 1, 2, 2]
    labels = ["Sport", "Money", "Sci/Tech"]
    plain = LabelScheme("plain", "{label}")
    evaluator = ZeroShotEvaluator(texts, gold, labels, plain)
    encoder = KeywordEncoder()
    embeddings = evaluator.embed(encoder)
    without = evaluator.score(encoder, embeddings)
    with_aliases = evaluator.score(encoder, embeddings,
                                   LabelScheme("aliases", "{label}", {"Sci/Tech": ["Science", "Technology"]}))
    assert with_aliases.accuracy == 1.0
    assert without.accuracy < 1.0  # "Sci/Tech" alone matches neither keyword
    assert with_aliases.confusion.tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 2]]
    assert with_aliases.per_label_accuracy == {"Sport": 1.0, "Money": 1.0, "Sci/Tech": 1.0}
    assert evaluator(encoder)["accuracy"] == without.accuracy


def test_rejects_mismatched_or_empty_input():
    with pytest.raises(ValueError, match="labels"):
        ZeroShotEvaluator(["a"], [0, 1], ["x", "y"], LabelScheme("s", "{label}"))
    with pytest.raises(ValueError, match="empty"):
        ZeroShotEvaluator([], [], ["x"], LabelScheme("s", "{label}"))
