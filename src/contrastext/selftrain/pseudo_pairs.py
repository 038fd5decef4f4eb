"""Training pairs from pseudo-labels: (anchor, label prompt).

Wikipedia pools (``categories`` given): every category of a kept page is paired with the page's label,
as WC-SBERT does. A category met on kept pages of several labels goes to the label most of them carry,
so one category never pulls towards two labels. Plain-text pools: the kept text itself is the anchor.

The positive is the prompt of the label's best-scoring alias for that item ("This topic is talk about
Science"), so an encoder trained on the pairs is scored with the very strings it was trained towards.
Many rows share a positive; the MNR loss treats such rows as one candidate (no false negatives).
"""

from __future__ import annotations

import functools
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


def _shared_prompts(label_set: LabelSet, template: str):
    """``prompt_for`` made once per (label, alias): a million pairs share a few prompt strings, not a copy each."""
    return functools.cache(lambda label, alias: prompt_for(label_set, template, label, alias))


def text_pairs(texts: Sequence[str], pseudo: PseudoLabels, label_set: LabelSet, template: str,
               max_pairs_per_label: int | None = None) -> PseudoPairs:
    anchors, positives, labels = [], [], []
    per_label: Counter = Counter()
    prompt = _shared_prompts(label_set, template)
    for i in _most_confident_first(pseudo):
        label = int(pseudo.label[i])
        if max_pairs_per_label is not None and per_label[label] >= max_pairs_per_label:
            continue
        per_label[label] += 1
        anchors.append(texts[i])
        positives.append(prompt(label, int(pseudo.alias[i, label])))
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

    The votes are tallied as they come, per (category, label, alias): a count and the earliest occurrence.
    Memory is O(distinct categories) (their names, and a few numbers per category and label), not
    O(occurrences): a million-page pool has millions of category occurrences on its kept pages.
    The result is the one the pages would give in order of confidence: a category goes to the label most of
    its pages carry, a tie to the label met first in that order; its alias likewise; categories are listed
    by their first page in that order, then by their place on that page.
    """
    n_labels = len(label_set.labels)
    n_aliases = max(len(a) for a in label_set.aliases)
    if pseudo.alias.size and int(pseudo.alias.max()) >= n_aliases:  # it would count towards the next label
        raise ValueError(f"alias index {int(pseudo.alias.max())} outside the label set's {n_aliases} aliases")
    order = _most_confident_first(pseudo)
    rank = np.empty(len(pseudo.label), dtype=np.min_scalar_type(max(len(order), 1)))
    rank[order] = np.arange(len(order))
    names: list[str] = []
    index: dict[str, int] = {}
    votes = _Tally()
    for i, cats in pages:
        page_label = int(pseudo.label[i])
        base = page_label * n_aliases + int(pseudo.alias[i, page_label])
        page_first = int(rank[i]) * _MAX_PLACES
        for place, name in enumerate(dict.fromkeys(cats or ())):
            category = index.get(name)
            if category is None:
                category = index[name] = len(names)
                names.append(name)
            votes.add(category * n_labels * n_aliases + base, page_first + min(place, _MAX_PLACES - 1))
    keys, counts, earliest = votes.totals()
    return _pairs_of_votes(names, keys, counts, earliest, n_labels, n_aliases, label_set, template,
                           max_pairs_per_label)


_MAX_PLACES = 1 << 16  # a category's place on its page, packed below the page's rank


class _Tally:
    """Occurrence count and earliest ``first`` per integer key, folded every ``buffer`` occurrences.

    Kept as sorted numpy arrays, not dicts of counters: a dict entry costs some 100 bytes, a key here 20.
    """

    def __init__(self, buffer: int = 1 << 18):
        self.buffer = buffer
        self._keys, self._first = array("q"), array("q")
        self.keys = np.zeros(0, np.int64)
        self.counts = np.zeros(0, np.int64)
        self.earliest = np.zeros(0, np.int64)

    def add(self, key: int, first: int) -> None:
        self._keys.append(key)
        self._first.append(first)
        if len(self._keys) >= self.buffer:
            self._fold()

    def totals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sorted distinct keys, their counts and earliest ``first``."""
        self._fold()
        return self.keys, self.counts, self.earliest

    def _fold(self) -> None:
        if not self._keys:
            return
        keys, counts, first = _reduce(np.frombuffer(self._keys, np.int64), None,
                                      np.frombuffer(self._first, np.int64))
        self._keys, self._first = array("q"), array("q")
        # merged into the sorted totals in place of a re-sort of everything: memory is the totals once more
        at = np.searchsorted(self.keys, keys)
        known = at < len(self.keys)
        known[known] = self.keys[at[known]] == keys[known]
        np.add.at(self.counts, at[known], counts[known])
        np.minimum.at(self.earliest, at[known], first[known])
        new, where = ~known, at[~known]
        self.keys = np.insert(self.keys, where, keys[new])
        self.counts = np.insert(self.counts, where, counts[new])
        self.earliest = np.insert(self.earliest, where, first[new])


def _reduce(keys: np.ndarray, counts: np.ndarray | None, first: np.ndarray,
            presorted: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct key (sorted): summed counts (each row counts 1 when ``counts`` is None), the minimum ``first``."""
    if not presorted:
        order = np.argsort(keys, kind="stable")
        keys, first = keys[order], first[order]
        counts = None if counts is None else counts[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, np.int64)
    summed = np.diff(np.r_[starts, len(keys)]) if counts is None else np.add.reduceat(counts, starts)
    return keys[starts], summed, np.minimum.reduceat(first, starts)


def _best_per_group(group: np.ndarray, member: np.ndarray, counts: np.ndarray,
                    earliest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group: the member with most votes, a tie to the one met first; and the group (both sorted by group)."""
    order = np.lexsort((earliest, -counts, group))
    group = group[order]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    return group[starts], member[order[starts]]


def _pairs_of_votes(names: list[str], keys: np.ndarray, counts: np.ndarray, earliest: np.ndarray, n_labels: int,
                    n_aliases: int, label_set: LabelSet, template: str,
                    max_pairs_per_label: int | None) -> PseudoPairs:
    if not len(keys):
        return PseudoPairs([], [], [], conflicts=0)
    category_label = keys // n_aliases  # keys are sorted, so these are too
    alias = keys % n_aliases
    pair_keys, pair_counts, pair_earliest = _reduce(category_label, counts, earliest, presorted=True)
    categories, winners = _best_per_group(pair_keys // n_labels, pair_keys % n_labels, pair_counts, pair_earliest)
    winner = np.empty(len(names), np.int64)
    winner[categories] = winners
    conflicts = int(np.count_nonzero(np.bincount(pair_keys // n_labels, minlength=len(names)) > 1))
    won = category_label % n_labels == winner[category_label // n_labels]
    alias_categories, best = _best_per_group(category_label[won] // n_labels, alias[won], counts[won], earliest[won])
    best_alias = np.empty(len(names), np.int64)
    best_alias[alias_categories] = best
    first_seen = np.full(len(names), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first_seen, pair_keys // n_labels, pair_earliest)
    anchors, positives, labels = [], [], []
    per_label: Counter = Counter()
    prompt = _shared_prompts(label_set, template)
    # categories of the most confident pages first, so a cap keeps the surest ones
    for c in np.argsort(first_seen, kind="stable").tolist():
        chosen = int(winner[c])
        if max_pairs_per_label is not None and per_label[chosen] >= max_pairs_per_label:
            continue
        per_label[chosen] += 1
        anchors.append(names[c])
        positives.append(prompt(chosen, int(best_alias[c])))
        labels.append(chosen)
    return PseudoPairs(anchors, positives, labels, conflicts=conflicts)


def _most_confident_first(pseudo: PseudoLabels) -> np.ndarray:
    kept = pseudo.kept
    return kept[np.argsort(-pseudo.confidence[kept], kind="stable")]
