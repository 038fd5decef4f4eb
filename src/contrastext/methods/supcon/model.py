"""SupConClassifier: an encoder and a linear head trained with focal loss + λ·supervised NT-Xent.

    model = SupConClassifier().fit(texts, labels)
    model.predict(["another text"])

The same training as the ``supcon_classify`` job's variants (the ``classify`` objective of
``contrastext.train``, class-balanced batches, ``contrastext.methods.supcon.settings``), on texts held in
memory. The saved folder is a ``TextClassifier`` folder (the encoder in sentence-transformers format, the
head beside it) plus ``supcon_classifier.json`` with the classes as given (strings or integers).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from contrastext.config import TrainConfig
from contrastext.methods.supcon.settings import SupConSettings, classify_train_config, default_classify_train
from contrastext.methods.training import encoder_spec, fit_rows, work_folder
from contrastext.models.resolve import DEFAULT_MODEL

MANIFEST = "supcon_classifier.json"


class SupConClassifier:
    """``fit(texts, labels)`` trains encoder + head; ``predict`` gives labels, ``predict_proba`` [N, classes].

    Settings: ``config`` (a ``SupConSettings``; a job variant gives its own) with any of its fields given as
    a keyword over it, the loss's too: ``ntxent_weight`` is λ (default 0: focal loss alone, as the job's
    variants), ``focal_weight``, ``gamma``, ``temperature``; ``epochs``, ``lr`` and ``head_lr`` override the
    train block's values where given. ``train`` is the whole train block (default: the job's, batch 32 with 4
    rows per class, mean pooling, 128 tokens, one epoch). ``encoder`` may also be a classifier folder an
    earlier fit saved: its head is trained on unless ``reset_head=True``, ``freeze_encoder=True`` trains the
    head alone (the second phase of the two-phase schedule). ``classes_`` holds the labels in the order of
    ``predict_proba``'s columns (sorted, unless ``fit`` is given ``classes``). ``work_dir``: where the fit's
    checkpoints and model are kept; without one they go to a temporary folder removed at the end of ``fit``.
    """

    def __init__(self, encoder: Any = DEFAULT_MODEL, *, config: SupConSettings | None = None,
                 train: TrainConfig | None = None, batch_size: int = 64,
                 work_dir: str | os.PathLike[str] | None = None, **settings: Any):
        self.encoder = encoder
        self.config = SupConSettings.given(config, settings)
        self.train = train or default_classify_train()
        self.batch_size = batch_size
        self.work_dir = work_dir
        self.model_ = None
        self.classes_: list[Any] = []
        self.fit_result_ = None

    # the settings the methods below read, by their names in ``config``
    loss = property(lambda self: self.config.loss)
    epochs = property(lambda self: self.config.epochs)
    lr = property(lambda self: self.config.lr)
    head_lr = property(lambda self: self.config.head_lr)
    freeze_encoder = property(lambda self: self.config.freeze_encoder)
    reset_head = property(lambda self: self.config.reset_head)

    def train_config(self, num_labels: int, model: str) -> TrainConfig:
        """The train block a fit from ``model`` (a spec or folder) on ``num_labels`` classes runs."""
        return classify_train_config(self.train, self.loss, num_labels, model, freeze_encoder=self.freeze_encoder,
                                     reset_head=self.reset_head, epochs=self.epochs, lr=self.lr,
                                     head_lr=self.head_lr)

    def fit(self, texts: Sequence[str], labels: Sequence[Any], *, classes: Sequence[Any] | None = None,
            output: str | None = None) -> "SupConClassifier":
        """``classes``: every label, in the order of ``predict_proba``'s columns (default: the sorted labels).
        ``output``: a folder or URI to train in (checkpoints, and the model in ``output/model``); a fit
        interrupted there resumes. Without it the fit trains under ``work_dir`` or a temporary folder."""
        from contrastext import storage
        from contrastext.models.classifier import TextClassifier

        texts = list(texts)
        labels = [_plain(label) for label in labels]
        if len(texts) != len(labels):
            raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("texts must be strings")
        self.classes_ = [_plain(c) for c in classes] if classes is not None else sorted(set(labels))
        if len(self.classes_) < 2 or len(set(self.classes_)) != len(self.classes_):
            raise ValueError("a classifier needs at least two distinct labels")
        index = {label: i for i, label in enumerate(self.classes_)}
        unknown = sorted({str(label) for label in labels if label not in index})
        if unknown:
            raise ValueError(f"labels not among classes: {unknown[:10]}")
        rows = [{"text": text, "label": index[label]} for text, label in zip(texts, labels)]
        with work_folder(self.work_dir, "supcon") as folder:
            config = self.train_config(len(self.classes_), encoder_spec(self.encoder, folder / "start"))
            self.fit_result_ = fit_rows(rows, config, folder, "fit", output=output)
            with storage.local_copy(self.fit_result_.model_path) as model:
                self.model_ = TextClassifier.from_pretrained(model, labels=[str(c) for c in self.classes_],
                                                             max_length=config.encoder.max_length)
        return self

    def _check_fitted(self) -> None:
        if self.model_ is None:
            raise RuntimeError("call fit(texts, labels) first, or SupConClassifier.load(folder)")

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        self._check_fitted()
        return self.model_.predict(list(texts), batch_size=self.batch_size).probabilities

    def embed_and_predict_proba(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Embeddings and class probabilities of ``texts`` from one forward pass (``predict``'s columns)."""
        self._check_fitted()
        prediction = self.model_.predict(list(texts), batch_size=self.batch_size)
        return prediction.embeddings, prediction.probabilities

    def predict(self, texts: Sequence[str]) -> list[Any]:
        return [self.classes_[i] for i in self.predict_proba(texts).argmax(axis=1)]

    def transform(self, texts: Sequence[str]) -> np.ndarray:
        """The embeddings the head reads (where supervised NT-Xent pulls each class together)."""
        self._check_fitted()
        return self.model_.encoder.encode(list(texts), batch_size=self.batch_size)

    def save(self, path: str | os.PathLike[str]) -> Path:
        self._check_fitted()
        target = self.model_.save(path)
        (target / MANIFEST).write_text(json.dumps({"classes": self.classes_}, indent=2), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str], **kwargs) -> "SupConClassifier":
        from contrastext.models.classifier import TextClassifier

        model = cls(str(path), **kwargs)
        model.classes_ = json.loads((Path(path) / MANIFEST).read_text(encoding="utf-8"))["classes"]
        model.model_ = TextClassifier.from_pretrained(str(path))
        return model


def _plain(label: Any) -> Any:
    """A numpy scalar label as the Python value it holds (so it is saved as JSON and compares as given)."""
    return label.item() if isinstance(label, np.generic) else label
