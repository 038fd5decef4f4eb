"""The bundled demo data loads and is well formed."""

from __future__ import annotations

from collections import Counter

from contrastext.data.demo import load_demo_labels, load_demo_pairs


def test_pairs_well_formed() -> None:
    pairs = load_demo_pairs()
    assert len(pairs) == 392  # the shipped demo file's pairs, every one kept
    for pair in pairs:
        assert set(pair) == {"anchor", "positive"}
        assert all(isinstance(v, str) and v.strip() == v and v for v in pair.values())
        assert pair["anchor"] != pair["positive"]


def test_pairs_unique_in_either_order() -> None:
    pairs = load_demo_pairs()
    keys = [frozenset((p["anchor"], p["positive"])) for p in pairs]
    assert len(set(keys)) == len(keys)


def test_labels_balanced() -> None:
    data = load_demo_labels()
    labels = data["labels"]
    assert labels == ["Sports", "Science", "Business", "Politics"]
    texts = data["texts"]
    assert len(texts) == 40  # ten per label, as shipped
    for item in texts:
        assert set(item) == {"text", "label"}
        assert isinstance(item["text"], str) and item["text"].strip()
        assert item["label"] in labels
    counts = Counter(item["label"] for item in texts)
    assert len(set(counts.values())) == 1 and set(counts) == set(labels)
    assert len({item["text"] for item in texts}) == len(texts)
