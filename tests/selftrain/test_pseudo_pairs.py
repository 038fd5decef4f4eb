from __future__ import annotations

import numpy as np
import pytest

from contrastext.selftrain.pseudo_labels import PseudoLabels
from contrastext.selftrain.pseudo_pairs import category_pairs, text_pairs
from contrastext.zeroshot import LabelSet

LABELS = LabelSet(("Sports", "Sci/Tech"), (("Sports",), ("Science", "Technology")))
T = "About {label}"


def _pseudo(labels, confidence, alias, kept):
    labels = np.asarray(labels)
    alias_matrix = np.zeros((len(labels), 2), dtype=np.int64)
    alias_matrix[np.arange(len(labels)), labels] = alias
    return PseudoLabels(label=labels, score=np.asarray(confidence), confidence=np.asarray(confidence),
                        alias=alias_matrix, kept=np.asarray(kept))


def test_text_pairs_use_the_best_alias_and_cap_per_label():
    pseudo = _pseudo([0, 1, 1, 0], [0.9, 0.8, 0.7, 0.1], [0, 1, 0, 0], kept=[0, 1, 2])
    pairs = text_pairs(["t0", "t1", "t2", "t3"], pseudo, LABELS, T)
    assert pairs.anchors == ["t0", "t1", "t2"]
    assert pairs.positives == ["About Sports", "About Technology", "About Science"]
    assert pairs.per_label(2).tolist() == [1, 2]
    capped = text_pairs(["t0", "t1", "t2", "t3"], pseudo, LABELS, T, max_pairs_per_label=1)
    assert capped.anchors == ["t0", "t1"]  # the most confident of each label


def test_category_pairs_vote_and_deduplicate():
    categories = [["Football", "Cities"], ["Physics", "Cities"], ["Physics"], ["Cities"]]
    pseudo = _pseudo([0, 1, 1, 1], [0.9, 0.8, 0.7, 0.6], [0, 0, 0, 0], kept=[0, 1, 2, 3])
    pairs = category_pairs(categories, pseudo, LABELS, T)
    rows = dict(zip(pairs.anchors, pairs.positives))
    assert rows == {"Football": "About Sports", "Cities": "About Science", "Physics": "About Science"}
    assert pairs.conflicts == 1  # "Cities" was on pages of both labels; 2 of its 3 pages say Sci/Tech
    assert len(pairs.rows()) == 3 and set(pairs.rows()[0]) == {"anchor", "positive"}


def _category_pairs_by_counters(categories, pseudo, label_set, template, max_pairs_per_label=None):
    """The per-category counter formulation, pages read in order of confidence (the reference)."""
    from collections import Counter, defaultdict

    from contrastext.selftrain.pseudo_pairs import PseudoPairs, prompt_for

    votes, aliases, first_seen = defaultdict(Counter), defaultdict(Counter), {}
    kept = pseudo.kept[np.argsort(-pseudo.confidence[pseudo.kept], kind="stable")]
    for order, i in enumerate(kept):
        label = int(pseudo.label[i])
        for category in dict.fromkeys(categories[i]):
            votes[category][label] += 1
            aliases[(category, label)][int(pseudo.alias[i, label])] += 1
            first_seen.setdefault(category, order)
    anchors, positives, labels, per_label = [], [], [], Counter()
    for category in sorted(votes, key=first_seen.__getitem__):
        label = votes[category].most_common(1)[0][0]
        if max_pairs_per_label is not None and per_label[label] >= max_pairs_per_label:
            continue
        per_label[label] += 1
        anchors.append(category)
        positives.append(prompt_for(label_set, template, label, aliases[(category, label)].most_common(1)[0][0]))
        labels.append(label)
    return PseudoPairs(anchors, positives, labels, conflicts=sum(len(c) > 1 for c in votes.values()))


@pytest.mark.parametrize("buffer", [1 << 20, 7])  # tallied at the end, or folded every 7 occurrences
def test_category_pairs_of_pages_in_file_order_match_the_counter_formulation(buffer, monkeypatch):
    from contrastext.selftrain import pseudo_pairs
    from contrastext.selftrain.pseudo_pairs import category_pairs_of_pages

    tally = pseudo_pairs._Tally
    monkeypatch.setattr(pseudo_pairs, "_Tally", lambda: tally(buffer=buffer))

    rng = np.random.default_rng(3)
    n = 400
    names = [f"C{i}" for i in range(60)]
    categories = [[names[j] for j in rng.zipf(1.3, size=rng.integers(0, 7)) % 60] for _ in range(n)]
    labels = rng.integers(0, 2, n)
    alias = np.zeros((n, 2), dtype=np.int64)
    alias[:, 1] = rng.integers(0, 2, n)
    confidence = np.round(rng.random(n), 1)  # ties in confidence, as margins have
    pseudo = PseudoLabels(label=labels, score=confidence, confidence=confidence, alias=alias,
                          kept=np.sort(rng.choice(n, 250, replace=False)))
    for cap in (None, 5):
        expected = _category_pairs_by_counters(categories, pseudo, LABELS, T, cap)
        shuffled = [(int(i), categories[i]) for i in rng.permutation(pseudo.kept)]
        got = category_pairs_of_pages(shuffled, pseudo, LABELS, T, cap)
        assert (got.anchors, got.positives, got.labels, got.conflicts) == \
               (expected.anchors, expected.positives, expected.labels, expected.conflicts)
        assert category_pairs(categories, pseudo, LABELS, T, cap).anchors == expected.anchors


def test_the_category_tally_holds_distinct_keys_not_occurrences():
    """200,000 occurrences of 50 keys: the tally keeps 50 counts, not a list of every occurrence (which at
    16 bytes an occurrence would be 3.2 MB)."""
    import tracemalloc

    from contrastext.selftrain.pseudo_pairs import _Tally

    rng = np.random.default_rng(0)
    keys = rng.integers(0, 50, 200_000).tolist()
    tally = _Tally(buffer=4_096)
    tracemalloc.start()
    try:
        for n, key in enumerate(keys):
            tally.add(key, n)
        distinct, counts, earliest = tally.totals()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 500_000, peak
    assert distinct.tolist() == sorted(set(keys))
    assert counts.tolist() == np.bincount(keys, minlength=50).tolist()
    assert earliest.tolist() == [keys.index(k) for k in range(50)]
