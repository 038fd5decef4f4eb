from __future__ import annotations

import numpy as np

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
