"""A label-free check on self-training rounds: do a model's labels follow the pool's own neighbourhoods, and
does each label still sit where its name points?

The reference is fixed before any round: a seeded sample of the pool, each sampled item's nearest neighbours
and its embedding under the round-0 model, and the round-0 model's embeddings of the label strings. Training
cannot move any of these, so a round cannot raise its score just by pulling its own pseudo-labels together
(what a margin or a silhouette on the trained model's embeddings would reward). A model's score is the
product of two parts:

- **kappa**: Cohen's kappa between an item's label and its neighbours' labels: the share of neighbour pairs
  labelled alike, corrected for the agreement the label proportions give by chance, so labelling everything
  alike scores 0, not 1. A round trained on a noisy teacher spreads noise over the labels and breaks
  neighbourhoods.
- **anchored**: the share of labels whose items' mean round-0 embedding is still nearest, among the round-0
  label embeddings, to the label's own name. A teacher that clusters well but names clusters wrongly (k-means
  refined prototypes can do this) raises kappa while a group of texts drifts to another label's name; the
  centroid moves with it and the label loses its anchor.

A model can be delivered with any head asked for (``methods.wcsbert.heads``): its label prompts, the prototypes
of its own pool labels, or their blend. The guard scores each head's labels the same way; the prompt head's
score decides whether a round beats the round-0 model, and the score of the head a trained round is delivered
with whether it beats an earlier round (``methods.wcsbert.stopping``). With the blend asked for (the default), a
trained model is delivered with it: on
the unskewed label sets of ``benchmarks/heads_tokens.py`` a trained model's blend came within 0.009 of its
better head (on a skewed 20 Newsgroups, up to 2.1 points below its prompts; benchmarks/guard_record.py --seed 4).
The untrained model is delivered with its prototypes where they score clearly better than its prompts
(``PROTOTYPE_MARGIN``), else with its prompts, not the blend: where the prototypes do not lead, the labels'
pool centroids are not to be trusted (on a skewed 20 Newsgroups draw the untrained blend was 2 points below
the prompts). Without the blend, a trained model's prototypes need a lead of ``TRAINED_PROTOTYPE_MARGIN``:
its prompts, trained towards the texts, have caught up.

The anchored part was added after a round on the Vital topic names (names only, refined prototypes) lowered
accuracy from 0.538 to 0.476 while kappa rose from 0.609 to 0.638; there its anchored share fell from 1 to
0.82, and on every improving round measured it stayed at or above 0.95.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from contrastext.clustering import nearest_neighbours
from contrastext.methods.wcsbert.heads import LabelHead
from contrastext.methods.wcsbert.scoring import embed_label_strings
from contrastext.zeroshot import LabelSet, Templates, label_scores_and_aliases


@dataclass(frozen=True)
class GuardScore:
    kappa: float
    anchored: float

    @property
    def value(self) -> float:
        return self.kappa * self.anchored


#: how much more than the prompt head's a prototype head's guard must score to be delivered instead: the
#: guard's kappa favours a head that labels by the embeddings' own centroids, so a tie is no evidence.
#: On the untrained model (round 0) the prototypes won on 22 of 24 draws (benchmarks/untrained_heads.py);
PROTOTYPE_MARGIN = 0.05
#: on a trained round the prompts have caught up, and a 0.05 lead of the prototypes cost up to 6.6 points on
#: draws the rule was not chosen on (benchmarks/guard_record.py --seed 1): a trained round needs twice the lead
TRAINED_PROTOTYPE_MARGIN = 0.10


@dataclass(frozen=True)
class HeadScores:
    """The guard's score of each head one model could be delivered with, and those heads. The first head
    asked for (the prompts, by default) gives the model's score, which decides whether a round beats the round-0
    model (``methods.wcsbert.stopping``). A trained model is
    delivered with the blend where it was asked for; otherwise a head other than the blend is delivered where
    its score beats the first's by more than ``margin``, else the first."""

    scores: dict[str, GuardScore]  # head kind → its labels' score, in the order the heads were asked for
    heads: dict[str, LabelHead]
    margin: float = PROTOTYPE_MARGIN
    trained: bool = False  # a self-trained model's (not the round-0 model's)

    @property
    def first(self) -> str:
        return next(iter(self.scores))

    @property
    def best(self) -> str:
        """The head to deliver: the blend on a trained model; else the first, unless another (not the blend)
        scores more than ``margin`` above it."""
        if self.trained and "blend" in self.scores:
            return "blend"
        others = [kind for kind in self.scores if kind != "blend" or kind == self.first]
        other = max(others, key=lambda kind: self.scores[kind].value)
        return other if self.scores[other].value > self.value + self.margin else self.first

    @property
    def value(self) -> float:
        """The model's score: its first head's."""
        return self.scores[self.first].value


def guard_fields(result: HeadScores) -> dict[str, object]:
    """A round record's guard fields: the model's score and its parts, the head to deliver, each head's score."""
    first = result.scores[result.first]
    return {"guard": first.value, "guard_kappa": first.kappa, "guard_anchored": first.anchored,
            "head": result.best, "guard_heads": {kind: score.value for kind, score in result.scores.items()}}


def guard_text(result: HeadScores) -> str:
    first = result.scores[result.first]
    others = ", ".join(f"{kind} head {score.value:.4f}" for kind, score in result.scores.items()
                       if kind != result.first)
    return (f"guard {first.value:.4f} (labels follow the pool's neighbourhoods with kappa {first.kappa:.4f}; "
            f"{first.anchored:.0%} of labels still nearest their own name)"
            + (f"; {others}; delivers the {result.best} head" if others else ""))


@dataclass
class GuardReference:
    ids: np.ndarray  # [n] the sampled pool items' ids
    neighbours: np.ndarray  # [n, k] each sampled item's nearest other sampled items (indices into ids)
    embeddings: np.ndarray  # [n, D] the sampled items under the round-0 model
    label_embeddings: np.ndarray  # [strings, D] the label strings under the round-0 model
    owner: np.ndarray  # [strings] the label of each string
    n_labels: int

    def score_heads(self, embeddings: np.ndarray, label_embeddings: np.ndarray,
                    kinds: Sequence[str] = ("prompts",), trained: bool = False) -> HeadScores:
        """The score of each head of ``kinds`` of one model (``trained``: a self-trained one, not the round-0
        model): ``embeddings`` [n, D] are its embeddings of the sampled items (in the order of ``ids``),
        ``label_embeddings`` of the label strings; the prototype head is made from those same items."""
        prompts = LabelHead("prompts", np.asarray(label_embeddings, np.float32), self.owner, self.n_labels)
        made = {"prompts": prompts}
        if {"prototypes", "blend"} & set(kinds):
            made["prototypes"] = prompts.prototypes(embeddings)
            made["blend"] = prompts.blend(made["prototypes"])
        heads = {kind: made[kind] for kind in kinds}
        return HeadScores({kind: self.score(head.labels(embeddings)) for kind, head in heads.items()}, heads,
                          TRAINED_PROTOTYPE_MARGIN if trained else PROTOTYPE_MARGIN, trained)

    def score(self, labels: np.ndarray) -> GuardScore:
        """The score of ``labels`` [n] (a model's labels of the sampled items, in the order of ``ids``)."""
        labels = np.asarray(labels)
        return GuardScore(neighbour_kappa(labels, self.neighbours),
                          anchored_share(labels, self.embeddings, self.label_embeddings, self.owner, self.n_labels))


def neighbour_kappa(labels: np.ndarray, neighbours: np.ndarray) -> float:
    observed = float((labels[:, None] == labels[neighbours]).mean())
    shares = np.bincount(labels) / len(labels)
    chance = float((shares ** 2).sum())
    return 0.0 if chance >= 1.0 else (observed - chance) / (1.0 - chance)


def anchored_share(labels: np.ndarray, embeddings: np.ndarray, label_embeddings: np.ndarray, owner: np.ndarray,
                   n_labels: int) -> float:
    """Share of the labels whose items' centroid (in ``embeddings``) scores its own label best; an empty label
    is not anchored."""
    counts = np.bincount(labels, minlength=n_labels)
    sums = np.zeros((n_labels, embeddings.shape[1]), dtype=np.float64)
    np.add.at(sums, labels, embeddings)
    used = counts > 0
    centroids = (sums[used] / counts[used, None]).astype(np.float32)
    scores, _ = label_scores_and_aliases(centroids, label_embeddings, owner, n_labels)
    return float((scores.argmax(axis=1) == np.flatnonzero(used)).sum() / n_labels)


def sample_positions(pool_rows: int, max_rows: int, seed: int) -> np.ndarray:
    """Sorted positions of a seeded sample of ``max_rows`` of ``pool_rows`` items (all when there are fewer)."""
    if pool_rows <= max_rows:
        return np.arange(pool_rows)
    return np.sort(np.random.default_rng(seed).choice(pool_rows, max_rows, replace=False))


def guard_reference(ids: np.ndarray, embeddings: np.ndarray, label_embeddings: np.ndarray, owner: np.ndarray,
                    n_labels: int, k: int) -> GuardReference:
    """The reference over the sampled items ``ids`` and their round-0 ``embeddings`` [len(ids), D]."""
    if len(ids) < 2:
        raise ValueError("a guard reference needs at least two pool items")
    neighbours = nearest_neighbours(embeddings, min(k, len(ids) - 1))
    return GuardReference(np.asarray(ids, dtype=np.int64), neighbours, np.asarray(embeddings, dtype=np.float32),
                          np.asarray(label_embeddings, dtype=np.float32), np.asarray(owner), n_labels)


@dataclass
class TextGuard:
    """The guard over texts held in memory: a later model is scored by encoding the sampled texts and the
    label strings again (the job reads the pool's stored embeddings instead)."""

    reference: GuardReference
    texts: list[str]  # the sampled texts, in the order of reference.ids
    label_set: LabelSet
    template: Templates
    batch_size: int = 64
    heads: tuple[str, ...] = ("prompts",)  # the heads a model is scored with (methods.wcsbert.heads.HEAD_KINDS)

    @classmethod
    def build(cls, encoder, texts: Sequence[str], label_set: LabelSet, template: Templates, *, sample: int,
              neighbours: int, seed: int, batch_size: int = 64, heads: Sequence[str] = ("prompts",)) -> "TextGuard":
        """The reference under ``encoder`` (the round-0 model) over a seeded sample of ``sample`` texts."""
        positions = sample_positions(len(texts), sample, seed)
        sampled = [texts[i] for i in positions]
        embeddings = encoder.encode(sampled, batch_size=batch_size)
        _, owner = label_set.flat()
        label_embeddings = embed_label_strings(encoder, label_set, template)
        reference = guard_reference(positions, embeddings, label_embeddings, owner, len(label_set.labels), neighbours)
        return cls(reference, sampled, label_set, template, batch_size, tuple(heads))

    def score(self, encoder=None) -> HeadScores:
        """The score of each head's labels of the sampled texts under ``encoder`` (None: the round-0 model the
        guard was built with, from the embeddings its reference holds: nothing is encoded again); a trained
        model's prototypes need ``TRAINED_PROTOTYPE_MARGIN`` to be delivered, the round-0 model's less, and a
        trained model's blend, where asked for, is delivered."""
        if encoder is None:
            return self.reference.score_heads(self.reference.embeddings, self.reference.label_embeddings, self.heads)
        embeddings = encoder.encode(self.texts, batch_size=self.batch_size)
        label_embeddings = embed_label_strings(encoder, self.label_set, self.template)
        return self.reference.score_heads(embeddings, label_embeddings, self.heads, trained=True)
