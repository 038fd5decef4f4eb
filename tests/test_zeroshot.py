"""Zero-shot classifier: alias helpers, alias → label scores, the label-set cache; MiniLM on real AG News rows."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from conftest import shared_data

from contrastext.zeroshot import (
    DEFAULT_TEMPLATE, LabelSet, ZeroShotClassifier, automatic_aliases, label_scores, predictions,
    split_camel_case, split_on_separators, validate_template,
)


class CountingEncoder:
    """Wraps a real encoder and records what it was asked to encode (to see the cache work)."""

    def __init__(self, encoder):
        self.encoder = encoder
        self.calls: list[list[str]] = []

    def encode(self, texts, batch_size=64):
        self.calls.append(list(texts))
        return self.encoder.encode(texts, batch_size=batch_size)


@pytest.fixture(scope="module")
def tiny(tiny_encoder_dir):
    from contrastext.models import TextEncoder

    return TextEncoder.from_pretrained(tiny_encoder_dir, device="cpu")


def test_alias_helpers():
    assert split_on_separators("Science & Technology") == ["Science", "Technology"]
    assert split_on_separators("Sci/Tech") == ["Sci", "Tech"]
    assert split_on_separators("Sports") == []
    assert split_camel_case("SciTech") == "Sci Tech"
    assert split_camel_case("HTMLParser") == "HTML Parser"
    assert split_camel_case("sports") is None
    assert automatic_aliases("Arts & CraftsSupplies") == ["Arts & CraftsSupplies", "Arts & Crafts Supplies", "Arts",
                                                          "CraftsSupplies", "Crafts Supplies"]
    assert automatic_aliases("World") == ["World"]


def test_label_set_merges_explicit_aliases_and_rejects_bad_labels():
    labels = LabelSet.build(["Sci/Tech", "World"], {"World": ["politics", "World"]})
    assert labels.aliases == (("Sci/Tech", "Sci", "Tech"), ("World", "politics"))
    strings, owner = labels.flat()
    assert strings == ["Sci/Tech", "Sci", "Tech", "World", "politics"] and owner.tolist() == [0, 0, 0, 1, 1]
    assert LabelSet.build(["Sci/Tech"], auto_aliases=False).aliases == (("Sci/Tech",),)
    for bad, message in (([], "At least one"), (["a", " "], "blank"), (["a", "a"], "distinct")):
        with pytest.raises(ValueError, match=message):
            LabelSet.build(bad)
    with pytest.raises(ValueError, match="not in the label list"):
        LabelSet.build(["a"], {"b": ["c"]})


def test_template_validation():
    assert validate_template(DEFAULT_TEMPLATE) == "This topic is talk about {label}"
    for bad in ("no field", "{label} and {other}", "{label} {0}", "{label"):
        with pytest.raises(ValueError, match="template"):
            validate_template(bad)


def test_label_score_is_the_max_over_its_aliases():
    texts = np.array([[1.0, 0.0], [0.0, 2.0]], dtype=np.float32)
    aliases = np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]], dtype=np.float32)  # label 0 has two aliases
    scores = label_scores(texts, aliases, np.array([0, 0, 1]), 2)
    np.testing.assert_allclose(scores, [[np.sqrt(0.5), 1.0], [1.0, 0.0]], atol=1e-6)
    best = predictions(scores, ["a", "b"], threshold=0.5)
    assert [p.label for p in best] == ["b", "a"] and best[0].labels == ["b", "a"] and best[1].labels == ["a"]


def test_classifier_matches_cosine_of_prompts_and_caches_label_sets(tiny):
    encoder = CountingEncoder(tiny)
    classifier = ZeroShotClassifier(encoder, cache_size=2)
    texts = ["a football match", "a stock market report"]
    labels = ["Sports", "Business & Finance"]
    result = classifier.classify(texts, labels)

    prompts = [DEFAULT_TEMPLATE.format(label=a) for a in ["Sports", "Business & Finance", "Business", "Finance"]]
    assert encoder.calls == [texts, prompts]
    text_emb, prompt_emb = tiny.encode(texts), tiny.encode(prompts)
    cos = (text_emb / np.linalg.norm(text_emb, axis=1, keepdims=True)) @ \
          (prompt_emb / np.linalg.norm(prompt_emb, axis=1, keepdims=True)).T
    expected = np.stack([cos[:, 0], cos[:, 1:].max(axis=1)], axis=1)
    got = np.array([[p.scores[lb] for lb in labels] for p in result])
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert [p.label for p in result] == [labels[i] for i in expected.argmax(axis=1)]

    classifier.classify(["another text"], labels)  # same label set: only the text is encoded
    assert encoder.calls[-1] == ["another text"] and (classifier.cache_hits, classifier.cache_misses) == (1, 1)
    classifier.classify(["x"], labels, template="About {label}.")  # another template: another entry
    classifier.classify(["x"], ["Sports"])
    assert classifier.cache_misses == 3 and len(classifier._cache) == 2  # LRU bound
    classifier.classify(["x"], labels)  # the oldest entry was evicted
    assert classifier.cache_misses == 4


@pytest.mark.integration
def test_minilm_zero_shot_on_ag_news():
    from contrastext.models import TextEncoder

    path = shared_data("ag_news/test.csv")
    names = {"1": "World", "2": "Sports", "3": "Business", "4": "Sci/Tech"}
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        per_class: dict[str, int] = {}
        for label, title, description in csv.reader(f):
            if per_class.get(label, 0) < 10:
                per_class[label] = per_class.get(label, 0) + 1
                rows.append((names[label], f"{title}. {description.replace(chr(92), ' ')}"))
            if len(rows) == 40:
                break
    classifier = ZeroShotClassifier(TextEncoder.from_pretrained("bundled:minilm", device="cpu", max_length=128))
    labels = list(names.values())
    predicted = classifier.predict([text for _, text in rows], labels)
    accuracy = float(np.mean([p == gold for p, (gold, _) in zip(predicted, rows)]))
    # 4 balanced classes: chance is 0.25; MiniLM with label prompts and aliases does far better
    assert accuracy >= 0.5, (accuracy, predicted)
    assert set(predicted) >= {"Sports", "Business"}


def test_a_primed_head_outlives_any_number_of_other_label_sets(tiny):
    """A saved model's own head (prompts or prototypes) is kept apart from the prompt cache: it is never
    evicted, so its labels keep scoring with the vectors the model was delivered with."""
    classifier = ZeroShotClassifier(tiny, cache_size=1)
    label_set = classifier.label_set(["Sports", "Business"])
    head = np.eye(2, tiny.embedding_dimension, dtype=np.float32)  # not what the prompts would encode to
    classifier.prime(label_set, classifier.template, head)
    for other in (["A", "B"], ["C", "D"], ["E", "F"]):
        classifier.classify(["x"], other)
    np.testing.assert_array_equal(classifier.alias_embeddings(label_set), head)
