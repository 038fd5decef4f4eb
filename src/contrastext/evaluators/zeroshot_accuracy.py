"""Zero-shot accuracy on a labelled text set: texts and label prompts embedded, best cosine wins.

The texts are embedded once per encoder (``embed``) and can then be scored under several label
configurations (labels only or a prompt; 4 labels or with aliases) without another forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from contrastext.metrics.classification import accuracy, macro_f1
from contrastext.zeroshot import LabelSet, Templates, ZeroShotClassifier


@dataclass(frozen=True)
class LabelScheme:
    """How labels are put to the encoder: alias strings per label and the prompt template (or an ensemble)."""

    name: str
    template: Templates
    aliases: Mapping[str, Sequence[str]] = field(default_factory=dict)  # label → strings that replace it
    keep_label: bool = True  # also embed the label's own spelling beside its aliases

    def label_set(self, labels: Sequence[str]) -> LabelSet:
        groups = []
        for label in labels:
            own = [label] if self.keep_label or label not in self.aliases else []
            groups.append(tuple(dict.fromkeys([*own, *self.aliases.get(label, ())])))
        return LabelSet(tuple(labels), tuple(groups))


@dataclass
class ZeroShotResult:
    accuracy: float
    macro_f1: float
    per_label_accuracy: dict[str, float]
    confusion: np.ndarray  # [true, predicted]
    predicted: np.ndarray

    def metrics(self) -> dict[str, float]:
        return {"accuracy": self.accuracy, "macro_f1": self.macro_f1}


class ZeroShotEvaluator:
    """Accuracy of zero-shot classification of ``texts`` (with gold ``label_ids`` into ``labels``)."""

    def __init__(self, texts: Sequence[str], label_ids: Sequence[int], labels: Sequence[str],
                 scheme: LabelScheme, batch_size: int = 128):
        if len(texts) != len(label_ids):
            raise ValueError(f"{len(texts)} texts but {len(label_ids)} labels")
        if not len(texts):
            raise ValueError("The evaluation set is empty.")
        self.texts = list(texts)
        self.label_ids = np.asarray(label_ids, dtype=np.int64)
        self.labels = list(labels)
        self.scheme = scheme
        self.batch_size = batch_size

    def embed(self, encoder) -> np.ndarray:
        return np.asarray(encoder.encode(self.texts, batch_size=self.batch_size), dtype=np.float32)

    def score(self, encoder, text_embeddings: np.ndarray, scheme: LabelScheme | None = None) -> ZeroShotResult:
        scheme = scheme or self.scheme
        classifier = ZeroShotClassifier(encoder, template=scheme.template, batch_size=self.batch_size)
        scores = classifier.score_embeddings(text_embeddings, scheme.label_set(self.labels))
        return self.result(scores.argmax(axis=1))

    def result(self, predicted: np.ndarray) -> ZeroShotResult:
        n = len(self.labels)
        confusion = np.zeros((n, n), dtype=np.int64)
        np.add.at(confusion, (self.label_ids, predicted), 1)
        per_label = {label: float(confusion[i, i] / max(1, confusion[i].sum())) for i, label in enumerate(self.labels)}
        return ZeroShotResult(accuracy=accuracy(self.label_ids, predicted),
                              macro_f1=macro_f1(self.label_ids, predicted, n),
                              per_label_accuracy=per_label, confusion=confusion, predicted=predicted)

    def __call__(self, encoder) -> dict[str, float]:
        return self.score(encoder, self.embed(encoder)).metrics()
