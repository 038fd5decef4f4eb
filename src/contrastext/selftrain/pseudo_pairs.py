"""Training pairs from pseudo-labels: (anchor, label prompt).

Wikipedia pools (``categories`` given): every category of a kept page is paired with the page's label,
as WC-SBERT does. A category met on kept pages of several labels goes to the label most of them carry,
so one category never pulls towards two labels. Plain-text pools: the kept text itself is the anchor.

The positive is the prompt of the label's best-scoring alias for that item ("This topic is talk about
Science"), so an encoder trained on the pairs is scored with the very strings it was trained towards.
Many rows share a positive; the MNR loss treats such rows as one candidate (no false negatives).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
    kept = ((int(i), categories[i]) for i in pseudo.kept)
    return category_pairs_of_pages(kept, pseudo, label_set, template, max_pairs_per_label)


def category_pairs_of_pages(pages: Iterable[tuple[int, Sequence[str] | None]], pseudo: PseudoLabels,
                            label_set: LabelSet, template: str,
                            max_pairs_per_label: int | None = None) -> PseudoPairs:
    """``category_pairs`` from ``(pool index, categories)`` of the kept pages, met in any order (as the pages
    files hold them), so no list of every kept page's categories is needed.

    Each category occurrence is kept as four numbers, not in per-category counters (a million-page pool
    has about 200k categories on its kept pages: some 250 MB of counters against about 25 MB here).
    The result is the one the pages would give in order of confidence: a category goes to the label most of
    its pages carry, a tie to the label met first in that order; its alias likewise; categories are listed
    by their first page in that order, then by their place on that page.
    """
    rank = np.empty(len(pseudo.label), dtype=np.int64)
    order = _most_confident_first(pseudo)
    rank[order] = np.arange(len(order))
    names: list[str] = []
    index: dict[str, int] = {}
    category, label, alias, first = array("l"), array("l"), array("l"), array("q")
    for i, cats in pages:
        page_label = int(pseudo.label[i])
        page_alias = int(pseudo.alias[i, page_label])
        for place, name in enumerate(dict.fromkeys(cats or ())):
            if name not in index:
                index[name] = len(names)
                names.append(name)
            category.append(index[name])
            label.append(page_label)
            alias.append(page_alias)
            first.append(int(rank[i]) * _MAX_PLACES + min(place, _MAX_PLACES - 1))
    return _pairs_of_occurrences(names, np.frombuffer(category, np.int64), np.frombuffer(label, np.int64),
                                 np.frombuffer(alias, np.int64), np.frombuffer(first, np.int64), len(label_set.labels),
                                 label_set, template, max_pairs_per_label)


_MAX_PLACES = 1 << 16  # a category's place on its page, packed below the page's rank


def _votes(keys: np.ndarray, first: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Occurrences per key and each key's earliest ``first``."""
    earliest = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(earliest, keys, first)
    return np.bincount(keys, minlength=size), earliest


def _winner(counts: np.ndarray, earliest: np.ndarray) -> np.ndarray:
    """Per row, the column with most votes; a tie goes to the column met first."""
    top = counts == counts.max(axis=1, keepdims=True)
    return np.where(top, earliest, np.iinfo(np.int64).max).argmin(axis=1)


def _pairs_of_occurrences(names: list[str], category: np.ndarray, label: np.ndarray, alias: np.ndarray,
                          first: np.ndarray, n_labels: int, label_set: LabelSet, template: str,
                          max_pairs_per_label: int | None) -> PseudoPairs:
    n = len(names)
    counts, earliest = _votes(category * n_labels + label, first, n * n_labels)
    counts, earliest = counts.reshape(n, n_labels), earliest.reshape(n, n_labels)
    winner = _winner(counts, earliest)
    conflicts = int(((counts > 0).sum(axis=1) > 1).sum())
    n_aliases = int(alias.max()) + 1 if len(alias) else 1
    won = label == winner[category]
    alias_counts, alias_earliest = _votes(category[won] * n_aliases + alias[won], first[won], n * n_aliases)
    best_alias = _winner(alias_counts.reshape(n, n_aliases), alias_earliest.reshape(n, n_aliases))
    anchors, positives, labels = [], [], []
    per_label: Counter = Counter()
    # categories of the most confident pages first, so a cap keeps the surest ones
    for c in np.argsort(earliest.min(axis=1), kind="stable").tolist():
        chosen = int(winner[c])
        if max_pairs_per_label is not None and per_label[chosen] >= max_pairs_per_label:
            continue
        per_label[chosen] += 1
        anchors.append(names[c])
        positives.append(prompt_for(label_set, template, chosen, int(best_alias[c])))
        labels.append(chosen)
    return PseudoPairs(anchors, positives, labels, conflicts=conflicts)


def _most_confident_first(pseudo: PseudoLabels) -> np.ndarray:
    kept = pseudo.kept
    return kept[np.argsort(-pseudo.confidence[kept], kind="stable")]
