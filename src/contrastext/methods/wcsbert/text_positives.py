"""Text–text positives for a self-training round, beside the (text, label prompt) pairs.

Two kinds (as PESCO pairs texts beside its prompt pairs):

- ``crops`` (off by default): two random contiguous word spans of one kept text, two views of the same text;
- ``same_label`` (on by default): a kept text and another kept text of the same pseudo-label, so texts a
  label holds pull together directly and not only through the label's prompt. It gained 2–3 points of
  zero-shot accuracy on AG News, 20 Newsgroups and the Vital topics (docs/methods/wcsbert.md, ``benchmarks/zeroshot.py``);
  crops gained about one.

Only plain-text pools have texts to pair (a Wikipedia pool's anchors are categories: the job turns the
default off there). A text's crops are
seeded by (seed, its index), a label's partner cycle by (seed, the label), so a round's pairs do not depend
on the order the work is done in. ``max_pairs_per_label`` caps each kind on its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from contrastext.config import Settings

if TYPE_CHECKING:  # the settings are read by the CLI, which should not import pyarrow for them
    from contrastext.methods.wcsbert.pseudo_labels import PseudoLabels
    from contrastext.methods.wcsbert.pseudo_pairs import PseudoPairs


class TextPositivesConfig(Settings):
    crops: bool = Field(False, description="each kept text also gives a pair of two random word spans of itself")
    same_label: bool | None = Field(None, description="each kept text also gives a pair with another kept text "
                                                      "of its pseudo-label (drawn at random among them); None: on "
                                                      "for plain texts, off for a Wikipedia pool")
    crop_share: float = Field(0.6, gt=0, lt=1, description="share of a text's words in each span")
    min_words: int = Field(8, ge=2, description="texts with fewer words give no crop pair")

    def resolved(self, plain_texts: bool = True) -> "TextPositivesConfig":
        """``same_label=None`` settled: on where the pool is plain texts, off where it has none to pair."""
        return self if self.same_label is not None else self.model_copy(update={"same_label": plain_texts})

    @property
    def enabled(self) -> bool:
        """Whether a round gets text pairs (``same_label=None`` counts as off until ``resolved``)."""
        return self.crops or bool(self.same_label)


def two_crops(words: Sequence[str], share: float, rng: np.random.Generator) -> tuple[str, str] | None:
    """Two contiguous spans of ``share`` of the words (at least one word each) starting at two different
    random words; None when the text is too short for two different spans."""
    length = max(1, round(share * len(words)))
    starts = len(words) - length + 1
    if starts < 2:
        return None
    first, second = rng.choice(starts, size=2, replace=False).tolist()
    return " ".join(words[first:first + length]), " ".join(words[second:second + length])


def text_positive_pairs(texts: Sequence[str], pseudo: PseudoLabels, config: TextPositivesConfig, *, seed: int,
                        max_pairs_per_label: int | None = None) -> PseudoPairs:
    """The round's text–text pairs over the kept texts (``texts`` indexed like the pool), most confident
    first; ``max_pairs_per_label`` caps each kind per label."""
    from contrastext.methods.wcsbert.pseudo_pairs import PseudoPairs

    config = config.resolved()
    anchors: list[str] = []
    positives: list[str] = []
    labels: list[int] = []
    kept = pseudo.kept[np.argsort(-pseudo.confidence[pseudo.kept], kind="stable")]
    if config.crops:
        per_label: Counter = Counter()
        for i in kept.tolist():
            label, words = int(pseudo.label[i]), texts[i].split()
            if len(words) < config.min_words or _full(per_label, label, max_pairs_per_label):
                continue
            crops = two_crops(words, config.crop_share, np.random.default_rng([seed, 0, i]))
            if crops is None or crops[0] == crops[1]:
                continue  # a pair of one string teaches nothing
            per_label[label] += 1
            anchors.append(crops[0])
            positives.append(crops[1])
            labels.append(label)
    if config.same_label:
        partner = _same_label_partners(kept, pseudo.label, seed)
        per_label = Counter()
        for i in kept.tolist():
            j, label = partner.get(i), int(pseudo.label[i])
            if j is None or texts[i] == texts[j] or _full(per_label, label, max_pairs_per_label):
                continue
            per_label[label] += 1
            anchors.append(texts[i])
            positives.append(texts[j])
            labels.append(label)
    return PseudoPairs(anchors, positives, labels)


def _full(per_label: Counter, label: int, cap: int | None) -> bool:
    return cap is not None and per_label[label] >= cap


def _same_label_partners(kept: np.ndarray, label: np.ndarray, seed: int) -> dict[int, int]:
    """Each kept item's partner: the next item of a seeded random cycle through its label's kept items
    (never itself; a label with one kept item gives none)."""
    partners: dict[int, int] = {}
    for value in np.unique(label[kept]).tolist():
        members = np.sort(kept[label[kept] == value])
        if len(members) < 2:
            continue
        cycle = members[np.random.default_rng([seed, 1, value]).permutation(len(members))].tolist()
        partners.update(zip(cycle, cycle[1:] + cycle[:1]))
    return partners


def combined(pairs: PseudoPairs, extra: PseudoPairs) -> PseudoPairs:
    """The label-prompt pairs followed by the text–text pairs."""
    from contrastext.methods.wcsbert.pseudo_pairs import PseudoPairs

    return PseudoPairs(pairs.anchors + extra.anchors, pairs.positives + extra.positives,
                       list(pairs.labels) + list(extra.labels), conflicts=pairs.conflicts)
