"""Classification metrics: accuracy, micro-F1 without a null label, macro-F1, AUPRC, embedding silhouette."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np

from contrastext.metrics.clustering import silhouette


def _as_ids(values: Sequence[int] | np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one label id per row, got shape {array.shape}")
    return array.astype(np.int64)


def _check_same_length(**arrays: np.ndarray) -> None:
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"row counts differ: {lengths}")
    if not next(iter(lengths.values())):
        raise ValueError("no rows to score")


def accuracy(y_true: Sequence[int], y_pred: Sequence[int]) -> float:
    t, p = _as_ids(y_true, "y_true"), _as_ids(y_pred, "y_pred")
    _check_same_length(y_true=t, y_pred=p)
    return float((t == p).mean())


def micro_f1(y_true: Sequence[int], y_pred: Sequence[int], num_labels: int, null_label: int | None = None) -> float:
    """Micro-F1 over every label but ``null_label`` (the TACRED convention for no_relation).

    A null row predicted as a real label is a false positive; a real row predicted as null a false
    negative; correct null predictions count for nothing. Without ``null_label`` this is accuracy.
    """
    from sklearn.metrics import f1_score

    t, p = _as_ids(y_true, "y_true"), _as_ids(y_pred, "y_pred")
    _check_same_length(y_true=t, y_pred=p)
    labels = [c for c in range(num_labels) if c != null_label]
    return float(f1_score(t, p, labels=labels, average="micro", zero_division=0))


def macro_f1(y_true: Sequence[int], y_pred: Sequence[int], num_labels: int) -> float:
    """Unweighted mean of the per-label F1 over the labels present in ``y_true``."""
    from sklearn.metrics import f1_score

    t, p = _as_ids(y_true, "y_true"), _as_ids(y_pred, "y_pred")
    _check_same_length(y_true=t, y_pred=p)
    present = sorted(c for c in set(t.tolist()) if 0 <= c < num_labels)
    return float(f1_score(t, p, labels=present, average="macro", zero_division=0))


def auprc_per_class(y_true: Sequence[int], probabilities: np.ndarray) -> dict[int, float]:
    """One-vs-rest average precision of each label that has a row in ``y_true`` (AUPRC)."""
    from sklearn.metrics import average_precision_score

    t = _as_ids(y_true, "y_true")
    probs = np.asarray(probabilities, dtype=np.float64)
    if probs.ndim != 2:
        raise ValueError(f"probabilities must be [rows, labels], got shape {probs.shape}")
    _check_same_length(y_true=t, probabilities=probs)
    return {int(c): float(average_precision_score(t == c, probs[:, c]))
            for c in range(probs.shape[1]) if (t == c).any()}


def embedding_silhouette(embeddings: np.ndarray, y_true: Sequence[int], max_rows: int | None = 5000,
                         seed: int = 0) -> float | None:
    """Cosine silhouette of the embeddings with the true labels as clusters, in [-1, 1]; None under 2 labels.

    Above ``max_rows`` rows it is computed on a seeded random sample (the exact score is quadratic).
    """
    t = _as_ids(y_true, "y_true")
    x = np.asarray(embeddings, dtype=np.float32)
    _check_same_length(y_true=t, embeddings=x)
    score = silhouette(x, t, sample_size=max_rows, seed=seed)
    return None if math.isnan(score) else score


@dataclass
class ClassificationReport:
    rows: int
    accuracy: float
    micro_f1: float  # without the null label when there is one
    macro_f1: float
    auprc: float  # mean of per_class_auprc
    silhouette: float | None
    per_class_auprc: dict[str, float] = field(default_factory=dict)
    per_class_f1: dict[str, float] = field(default_factory=dict)
    null_label: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def classification_report(y_true: Sequence[int], probabilities: np.ndarray, embeddings: np.ndarray | None,
                          label_names: Sequence[str], null_label: int | None = None,
                          silhouette_rows: int | None = 5000) -> ClassificationReport:
    """Every metric of a classifier's predictions (argmax of ``probabilities``) in one report."""
    from sklearn.metrics import f1_score

    t = _as_ids(y_true, "y_true")
    probs = np.asarray(probabilities)
    if probs.ndim != 2 or probs.shape[1] != len(label_names):
        raise ValueError(f"probabilities of shape {probs.shape} do not match {len(label_names)} labels")
    pred = probs.argmax(axis=1)
    n = len(label_names)
    per_auprc = auprc_per_class(t, probs)
    present = sorted(per_auprc)
    per_f1 = f1_score(t, pred, labels=present, average=None, zero_division=0)
    return ClassificationReport(
        rows=len(t),
        accuracy=accuracy(t, pred),
        micro_f1=micro_f1(t, pred, n, null_label),
        macro_f1=macro_f1(t, pred, n),
        auprc=float(np.mean(list(per_auprc.values()))),
        silhouette=None if embeddings is None else embedding_silhouette(embeddings, t, max_rows=silhouette_rows),
        per_class_auprc={label_names[c]: v for c, v in per_auprc.items()},
        per_class_f1={label_names[c]: float(v) for c, v in zip(present, per_f1)},
        null_label=None if null_label is None else label_names[null_label],
    )
