"""CCL epochs, each scored without labels, so the delivered phrase encoder is the best of the start model and
the epochs it trained.

Epoch 0 encodes the phrase instances with the start model and clusters them (k-means, k fixed). Every later
epoch takes the previous epoch's clusters, pseudo-labels the central instances, trains one CCL fit from the
previous model, then encodes and clusters again. Each epoch's clusters are scored by label-free measures;
``select_by`` names the one that picks the delivered epoch. The loop itself is the Shuffle & Divide one
(:func:`contrastext.methods.epochs.run_epochs`): a runner here only says how an epoch is
trained and scored.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from sklearn.metrics import adjusted_rand_score

from contrastext.clustering import KMeansResult, spherical_kmeans
from contrastext.methods.epochs import NothingToTrain
from contrastext.methods.uctopic.phrases import PhraseInstance
from contrastext.metrics.clustering import clustering_scores, silhouette

#: label-free scores of an epoch's clusters (``select_by`` names one, or ``last``):
#:  - ``silhouette``: cosine silhouette in the epoch's own embedding space (CCL tightens the clusters it trains
#:    on, so this favours trained epochs);
#:  - ``context_silhouette``: the same clusters in the TF-IDF space of the instances' sentences with the
#:    mention removed, which training does not move;
#:  - ``start_silhouette``: the same clusters in the start model's embedding space;
#:  - ``anchored_silhouette``: ``silhouette`` times the share of the start model's own silhouette that the
#:    epoch's clusters keep in the start model's space (at most 1): CCL may tighten its clusters, but clusters
#:    that no longer hold together where they came from (a drift, a collapse) lose their score with it.
SCORE_KEYS = ("silhouette", "context_silhouette", "start_silhouette", "anchored_silhouette")


def learned_nothing(loss: float | None, min_loss: float | None) -> bool:
    """Whether a CCL fit ending at mean ``loss`` had nothing left to learn (``finetune.min_loss``; None: never)."""
    return min_loss is not None and loss is not None and loss < min_loss


def anchored(silhouette_now: float, start_silhouette_now: float, start_own: float) -> float:
    """``silhouette_now`` discounted by how much of ``start_own`` (the start model's clusters' silhouette in its
    own space) the epoch's clusters keep in that space."""
    if math.isnan(start_own) or math.isnan(start_silhouette_now):  # no structure to compare with: no discount
        kept = 1.0
    elif start_own > 0:
        kept = min(1.0, start_silhouette_now / start_own)
    else:  # a start model without cluster structure: no share to keep, only no loss
        kept = 1.0 if start_silhouette_now >= start_own else 0.0
    return silhouette_now * kept if silhouette_now > 0 else silhouette_now


def mention_masked_sentences(instances: Sequence[PhraseInstance]) -> list[str]:
    """Each instance's sentence without its mention: the context alone, so the reference space says how
    the contexts group, not how the mentions' own words do."""
    return [f"{inst.sentence[:inst.start]} {inst.sentence[inst.end:]}".strip() for inst in instances]


@dataclass
class CCLEpochs:
    """The runner of :func:`run_epochs` for CCL.

    ``encode(model) -> embeddings`` and ``train(epoch, model, rows) -> (new model, fit record)`` come from
    the caller (the job trains on Ray Train and writes each epoch's model under its run folder).
    ``gold`` labels, where the instances have them, are scored for the report only.
    """

    instances: Sequence[PhraseInstance]
    start_model: str
    k: int
    encode: Callable[[str], np.ndarray]
    train: Callable[[int, str, list[dict]], tuple[str, dict[str, Any]]]
    make_pairs: Callable[[int, np.ndarray, KMeansResult], tuple[list[dict], dict[str, Any]]]
    gold: Sequence[str] | None = None
    seed: int = 0
    nredo: int = 3
    min_loss: float | None = None  # a fit whose mean loss is below it learned nothing new: its epoch is dropped
    sample_size: int | None = 5000
    embeddings: dict[int, np.ndarray] = field(default_factory=dict)  # by epoch, kept while they may be needed
    clusters: dict[int, KMeansResult] = field(default_factory=dict)
    start_own_silhouette: float | None = None  # epoch 0's silhouette, the anchor of anchored_silhouette

    def run_epoch(self, epoch: int, previous: dict[str, Any] | None) -> dict[str, Any]:
        row: dict[str, Any] = {"epoch": epoch}
        model = self.start_model
        if previous is not None:
            rows, pair_stats = self.make_pairs(epoch, self.embeddings[previous["epoch"]],
                                               self.clusters[previous["epoch"]])
            if not rows:
                raise NothingToTrain("no pseudo-labelled mentions to train on")
            model, fit_record = self.train(epoch, previous["model"], rows)
            loss = fit_record.get("loss")
            if learned_nothing(loss, self.min_loss):
                # the pseudo-labels were already apart: such a fit only moves the clusters away from the start's
                raise NothingToTrain(f"its fit had nothing left to learn (mean loss {loss:.4f} < {self.min_loss})",
                                     dropped={**row, **pair_stats, **fit_record, "model": model})
            row.update(pair_stats, **fit_record)
        embeddings = self.encode(model)
        result = spherical_kmeans(embeddings, self.k, seed=self.seed, nredo=self.nredo)
        self.embeddings[epoch], self.clusters[epoch] = embeddings, result
        row.update(self.scores(embeddings, result.assignments), model=model)
        return row

    def scores(self, embeddings: np.ndarray, assignments: np.ndarray) -> dict[str, float]:
        found = {
            "silhouette": silhouette(embeddings, assignments, sample_size=self.sample_size, seed=self.seed),
            "context_silhouette": silhouette(self._context_reference, assignments, sample_size=self.sample_size,
                                             seed=self.seed),
            "start_silhouette": silhouette(self.embeddings[0] if 0 in self.embeddings else embeddings, assignments,
                                           sample_size=self.sample_size, seed=self.seed),
        }
        if 0 in self.clusters:  # the epochs' runner has the start's clusters; the start choice has none
            # reported beside the scores: how far CCL has moved the clusters from the start model's
            found["start_agreement"] = float(adjusted_rand_score(self.clusters[0].assignments, assignments))
        start_own = self.start_own_silhouette if self.start_own_silhouette is not None else found["silhouette"]
        self.start_own_silhouette = start_own
        found["anchored_silhouette"] = anchored(found["silhouette"], found["start_silhouette"], start_own)
        if self.gold is not None:
            found.update({f"gold_{k}": v for k, v in clustering_scores(assignments, labels=self.gold).items()})
        return found

    def epoch_finished(self, rows: list[dict[str, Any]], select_by: str) -> None:
        # the start model's vectors stay (the start_silhouette reference); the previous epoch's are the next start
        for epoch in list(self.embeddings):
            if epoch not in (0, rows[-1]["epoch"]):
                del self.embeddings[epoch], self.clusters[epoch]

    @cached_property
    def _context_reference(self):
        from contrastext.data.documents import tfidf_matrix

        return tfidf_matrix(mention_masked_sentences(self.instances))


START_SCORE = "anchored_silhouette"


def choose_start(instances: Sequence[PhraseInstance], models: Sequence[str], k: int,
                 encode: Callable[[str], np.ndarray], *, gold: Sequence[str] | None = None, seed: int = 0,
                 nredo: int = 3, score: str = START_SCORE) -> tuple[str, list[dict[str, Any]]]:
    """The start model for CCL among ``models`` (the first, usually the untrained encoder, is the anchor):
    each clusters the instances (k-means, ``k``) and its clusters get the epochs' label-free scores; the best
    by ``score`` is chosen (the earlier one on a tie). Returns it and one row per candidate."""
    scorer = CCLEpochs(instances, models[0], k, encode=encode, train=None, make_pairs=None,  # type: ignore[arg-type]
                       gold=gold, seed=seed, nredo=nredo)
    rows = []
    for i, model in enumerate(models):
        embeddings = encode(model)
        if i == 0:
            scorer.embeddings[0] = embeddings
        result = spherical_kmeans(embeddings, k, seed=seed, nredo=nredo)
        rows.append({"candidate": i, "model": model, **scorer.scores(embeddings, result.assignments)})
    scored = [row for row in rows if not math.isnan(row[score])]
    chosen = max(scored, key=lambda row: (row[score], -row["candidate"])) if scored else rows[0]
    return chosen["model"], rows
