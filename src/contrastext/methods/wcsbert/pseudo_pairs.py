"""Training pairs from pseudo-labels: (anchor, label prompt).

Wikipedia pools (``categories`` given): every category of a kept page is paired with the page's label,
as WC-SBERT does. A category met on kept pages of several labels goes to the label most of them carry,
so one category never pulls towards two labels. Plain-text pools: the kept text itself is the anchor.

The positive is the prompt of the label's best-scoring alias for that item ("This topic is talk about
Science"), so an encoder trained on the pairs is scored with the very strings it was trained towards.
Many rows share a positive; the MNR loss treats such rows as one candidate (no false negatives).
Under an ensemble of templates (the labels scored by the mean of several prompts) the positive is the
alias put into the *first* template: one string per (label, alias) keeps that guarantee, where cycling
through the templates would make rows of one label each other's in-batch negatives.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from contrastext.methods.wcsbert.category_votes import KeptPages, first_per_label, page_votes, reduce_votes
from contrastext.methods.wcsbert.pseudo_labels import PseudoLabels
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


def category_pairs(categories: Sequence[Sequence[str] | None], pseudo: PseudoLabels, label_set: LabelSet,
                   template: str, max_pairs_per_label: int | None = None) -> PseudoPairs:
    """One pair per distinct category of the kept pages, labelled by the majority of its pages, in one process
    (``category_votes.write_category_pairs`` builds the same pairs from a pages folder with Ray Data).

    Categories are listed by their first page in order of confidence, then by their place on that page, so
    a cap keeps the surest ones."""
    n_labels, n_aliases = len(label_set.labels), max(len(a) for a in label_set.aliases)
    kept = KeptPages.of(np.arange(len(categories)), pseudo, n_labels, n_aliases)
    votes = page_votes(np.arange(len(categories)), pa.array(list(categories), pa.list_(pa.string())), kept)
    winners = reduce_votes(votes, n_labels, n_aliases)
    chosen = first_per_label(winners, max_pairs_per_label)
    prompt = _shared_prompts(label_set, template)
    labels = chosen.column("label").to_pylist()
    positives = [prompt(label, alias) for label, alias in zip(labels, chosen.column("alias").to_pylist())]
    return PseudoPairs(chosen.column("category").to_pylist(), positives, labels,
                       conflicts=int(pc.sum(winners.column("conflict")).as_py() or 0))


def label_prompts(label_set: LabelSet, template: str) -> list[list[str]]:
    """``[label][alias]``: the positive of a pair of that label and alias."""
    return [[prompt_for(label_set, template, label, alias) for alias in range(len(aliases))]
            for label, aliases in enumerate(label_set.aliases)]


def _most_confident_first(pseudo: PseudoLabels) -> np.ndarray:
    kept = pseudo.kept
    return kept[np.argsort(-pseudo.confidence[kept], kind="stable")]
