"""Training pairs from pseudo-labels: (anchor, label prompt).

Wikipedia pools (``categories`` given): every category of a kept page is paired with the page's label,
as WC-SBERT does. A category met on kept pages of several labels goes to the label most of them carry,
so one category never pulls towards two labels. Plain-text pools: the kept text itself is the anchor.

The positive is the prompt of the label's best-scoring alias for that item ("This topic is talk about
Science"), so an encoder trained on the pairs is scored with the very strings it was trained towards.
Many rows share a positive; the MNR loss treats such rows as one candidate (no false negatives).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from contrastext.selftrain.pseudo_labels import PseudoLabels
from contrastext.zeroshot import LabelSet


@dataclass
class PseudoPairs:
    anchors: list[str]
    positives: list[str]
    labels: list[int]  # label index of each pair
    conflicts: int = 0  # wikipedia pools: categories seen under more than one label

    def __len__(self) -> int:
        return len(self.anchors)

    def per_label(self, n_labels: int) -> np.ndarray:
        return np.bincount(np.asarray(self.labels, dtype=np.int64), minlength=n_labels)

    def rows(self) -> list[dict[str, str]]:
        return [{"anchor": a, "positive": p} for a, p in zip(self.anchors, self.positives)]


def prompt_for(label_set: LabelSet, template: str, label: int, alias: int) -> str:
    return template.replace("{label}", label_set.aliases[label][alias])


def text_pairs(texts: Sequence[str], pseudo: PseudoLabels, label_set: LabelSet, template: str,
               max_pairs_per_label: int | None = None) -> PseudoPairs:
    anchors, positives, labels = [], [], []
    per_label: Counter = Counter()
    for i in _most_confident_first(pseudo):
        label = int(pseudo.label[i])
        if max_pairs_per_label is not None and per_label[label] >= max_pairs_per_label:
            continue
        per_label[label] += 1
        anchors.append(texts[i])
        positives.append(prompt_for(label_set, template, label, int(pseudo.alias[i, label])))
        labels.append(label)
    return PseudoPairs(anchors, positives, labels)


def category_pairs(categories: Sequence[Sequence[str]], pseudo: PseudoLabels, label_set: LabelSet,
                   template: str, max_pairs_per_label: int | None = None) -> PseudoPairs:
    """One pair per distinct category of the kept pages, labelled by the majority of its pages."""
    votes: dict[str, Counter] = defaultdict(Counter)
    aliases: dict[tuple[str, int], Counter] = defaultdict(Counter)
    first_seen: dict[str, int] = {}
    for order, i in enumerate(_most_confident_first(pseudo)):
        label = int(pseudo.label[i])
        for category in dict.fromkeys(categories[i]):
            votes[category][label] += 1
            aliases[(category, label)][int(pseudo.alias[i, label])] += 1
            first_seen.setdefault(category, order)
    conflicts = sum(1 for counts in votes.values() if len(counts) > 1)
    anchors, positives, labels = [], [], []
    per_label: Counter = Counter()
    # categories of the most confident pages first, so a cap keeps the surest ones
    for category in sorted(votes, key=first_seen.__getitem__):
        label = votes[category].most_common(1)[0][0]
        if max_pairs_per_label is not None and per_label[label] >= max_pairs_per_label:
            continue
        per_label[label] += 1
        alias = aliases[(category, label)].most_common(1)[0][0]
        anchors.append(category)
        positives.append(prompt_for(label_set, template, label, alias))
        labels.append(label)
    return PseudoPairs(anchors, positives, labels, conflicts=conflicts)


def _most_confident_first(pseudo: PseudoLabels) -> np.ndarray:
    kept = pseudo.kept
    return kept[np.argsort(-pseudo.confidence[kept], kind="stable")]
