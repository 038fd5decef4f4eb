"""The Shuffle & Divide epoch loop, shared by ``ShuffleDivide.fit`` and the ``shuffle_divide`` job.

Epoch 0 scores the encoder before training. Every later epoch trains one epoch from the previous epoch's
model on fresh pairs, then scores the model it made: the documents are encoded, clustered, and the clusters
measured without labels. The epoch that scores best by ``select_by`` is delivered. Where an epoch's model
and outputs live is the runner's business: in memory for the class, a resumable stage on storage for the job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from contrastext.clustering import Clusterer
from contrastext.methods.shuffle_divide.negatives import Negatives, OtherClusterNegatives
from contrastext.metrics.clustering import clustering_scores, silhouette

#: label-free ways to choose the epoch: the clusters' cosine silhouette in the documents' TF-IDF space (which
#: training does not move, so epochs compare fairly), in the epoch's own embedding space, or the last epoch
SelectBy = Literal["tfidf_silhouette", "silhouette", "last"]

EpochRow = dict[str, Any]


class EpochRunner(Protocol):
    def run_epoch(self, epoch: int, previous: EpochRow | None) -> EpochRow:
        """Epoch 0: score the start model; later epochs: train from ``previous["model"]``, then score. The
        row holds ``epoch``, ``model`` and the scores."""

    def epoch_finished(self, rows: list[EpochRow], select_by: SelectBy) -> None:
        """Called after each epoch with every row so far (e.g. to delete models no longer needed)."""


class NothingToTrain(Exception):
    """An epoch found nothing to train on (e.g. no pseudo-labelled pair), or its fit nothing left to learn: the
    epochs stop there, that epoch is left out, and the best of those run before it is delivered. ``dropped``
    is the row of a fit that ran and was left out (its ``model`` and fit record), for the runner to clear."""

    def __init__(self, reason: str, dropped: EpochRow | None = None):
        super().__init__(reason)
        self.dropped = dropped


@dataclass
class EpochsOutcome:
    rows: list[EpochRow]
    chosen: EpochRow
    stopped: str | None = None  # why the epochs stopped before the last one asked for
    dropped: EpochRow | None = None  # the fit that ran and was left out where the epochs stopped, if one did


def run_epochs(runner: EpochRunner, epochs: int, select_by: SelectBy) -> EpochsOutcome:
    """Epochs 0 … ``epochs``, one after another (until one has nothing to train on); the chosen one by
    ``select_by``."""
    rows: list[EpochRow] = []
    stopped = dropped = None
    for epoch in range(epochs + 1):
        try:
            row = runner.run_epoch(epoch, rows[-1] if rows else None)
        except NothingToTrain as reason:
            if not rows:
                raise
            stopped, dropped = f"epoch {epoch}: {reason}", reason.dropped
            break
        rows.append(row)
        runner.epoch_finished(rows, select_by)
    return EpochsOutcome(rows, chosen_epoch(rows, select_by), stopped, dropped)


def best_epoch(rows: list[EpochRow], key: str) -> EpochRow | None:
    """The row with the highest ``key`` (the earlier one on a tie), ignoring rows without it."""
    scored = [r for r in rows if r.get(key) is not None and not math.isnan(r[key])]
    return max(scored, key=lambda r: (r[key], -r["epoch"])) if scored else None


def chosen_epoch(rows: list[EpochRow], select_by: SelectBy) -> EpochRow:
    """The epoch to deliver: the best by ``select_by``, or the last where no epoch has that score."""
    if select_by == "last":
        return rows[-1]
    return best_epoch(rows, select_by) or rows[-1]


def stale_epochs(rows: list[EpochRow], select_by: SelectBy) -> list[int]:
    """Epochs whose models are needed no more: neither the chosen one so far nor the next epoch's start."""
    keep = {rows[-1]["epoch"], chosen_epoch(rows, select_by)["epoch"]}
    return [row["epoch"] for row in rows if row["epoch"] not in keep]


def score_epoch(embeddings: np.ndarray, clusterer: Clusterer, *, labels: Any = None, reference: Any = None,
                sample_size: int | None = 5000, seed: int = 0) -> tuple[np.ndarray, dict[str, float]]:
    """Cluster an epoch's embeddings and score the clusters: silhouette in the embedding space, in the
    ``reference`` space (the documents' TF-IDF rows) where given, and ACC/NMI/AMI where labels are given
    (they are reported, never used to choose)."""
    assignments = np.asarray(clusterer.fit_predict(embeddings))
    scores = clustering_scores(assignments, labels=labels, embeddings=embeddings, sample_size=sample_size,
                               seed=seed)
    if reference is not None:
        scores["tfidf_silhouette"] = silhouette(reference, assignments, sample_size=sample_size, seed=seed)
    return assignments, scores


def training_groups(negatives: Negatives, clusterer: Clusterer, previous_assignments: np.ndarray | None,
                    previous_embeddings) -> np.ndarray | None:
    """Each training document's group for the negatives rule, under the previous epoch's model.

    Where the rule is ``OtherClusterNegatives`` grouping by the method's own clusterer and the training
    documents are the clustered ones (``previous_assignments`` given), the previous epoch's clusters are that
    grouping already; otherwise ``previous_embeddings()`` (the training documents under the previous model)
    are grouped by the rule.
    """
    if not negatives.group_column:
        return None
    if (previous_assignments is not None and isinstance(negatives, OtherClusterNegatives)
            and negatives.clusterer is None):
        return np.asarray(previous_assignments).astype(np.int64)
    return negatives.groups(previous_embeddings(), clusterer)
