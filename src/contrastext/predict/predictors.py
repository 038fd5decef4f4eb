"""What a model folder is, and the output columns it gives a chunk of texts.

The kind is read from the files a method's ``save`` writes (nothing is loaded to tell): ``wcsbert.json``
(WCSBert) or ``supcon_classifier.json`` (SupConClassifier) classify, ``shuffle_divide.json`` clusters,
``phrase_topics.json`` assigns phrase topics; any other encoder (a folder or a spec) embeds. Each predictor
calls the method's own class, so a text gets the same answer here as from ``Model.predict``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from contrastext import storage
from contrastext.errors import InputError

MARKERS = {"wcsbert.json": ("classify", "WCSBert"), "supcon_classifier.json": ("classify", "SupConClassifier"),
           "shuffle_divide.json": ("cluster", "ShuffleDivide"), "phrase_topics.json": ("topics", "PhraseTopicModel")}
# each method's encoder, whose backend (models.onnx_backend) its predictions run on: they all read only its
# embeddings (SupConClassifier's head too) or its token states and embeddings (PhraseTopicModel's span pooling
# and its phrases read alone)
ENCODER_OF = {"WCSBert": lambda m: m.encoder_, "ShuffleDivide": lambda m: m.encoder_,
              "SupConClassifier": lambda m: m.model_.encoder, "PhraseTopicModel": lambda m: m.encoder,
              "TextEncoder": lambda m: m}
TASKS_OF = {"classify": "label", "cluster": "cluster", "topics": "topic", "embed": None}  # the column counted


@dataclass(frozen=True)
class ModelKind:
    task: str  # classify, cluster, topics, embed
    method: str  # the class that reads the folder, or "TextEncoder"
    model: str

    @property
    def counted(self) -> str | None:
        """The output column whose values the summary counts."""
        return TASKS_OF[self.task]


def model_kind(model: str, task: str = "auto") -> ModelKind:
    """What ``model`` is, from its files alone; a folder that is no model, or a task it cannot do, is an
    error naming what is wrong (raised before any work)."""
    from contrastext.models import ModelNotFoundError, resolve_model_path

    found = None
    if storage.is_uri(model) or _local_dir(model):
        for marker, (kind, method) in MARKERS.items():
            if storage.exists(storage.join(model, marker)):
                found = ModelKind(kind, method, model)
                break
        if found is None and not storage.exists(storage.join(model, "config.json")):
            raise InputError(f"model {model} is not a model folder: it has none of {sorted(MARKERS)} nor a "
                             "transformer's config.json")
    if found is None:
        if not storage.is_uri(model):
            try:
                resolve_model_path(model)
            except ModelNotFoundError as error:
                raise InputError(f"model {model}: {error}") from error
        found = ModelKind("embed", "TextEncoder", model)
    if task not in ("auto", found.task):
        if task != "embed":
            raise InputError(f"model {model} is a {found.method} folder ({found.task}); it cannot {task}")
        found = ModelKind("embed", "TextEncoder", model)  # every saved model holds an encoder to embed with
    return found


def _local_dir(model: str) -> bool:
    from pathlib import Path

    return Path(model).expanduser().is_dir()


class Predictor:
    """Loads the model once; ``table(ids, texts)`` gives the chunk's output columns."""

    def __init__(self, kind: ModelKind, folder: str, *, top_k: int, include_embedding: bool,
                 max_length: int | None, batch_size: int, backend: str = "torch"):
        self.kind, self.top_k, self.include_embedding = kind, top_k, include_embedding
        self.batch_size = batch_size
        settings: dict[str, Any] = {"batch_size": batch_size}
        if max_length:
            settings["max_length"] = max_length
        if kind.method == "WCSBert":
            from contrastext.methods.wcsbert.model import WCSBert

            self.model = WCSBert.load(folder, **settings)
            self.labels = self.model.labels
        elif kind.method == "SupConClassifier":
            from contrastext.methods.supcon.model import SupConClassifier

            self.model = SupConClassifier.load(folder, batch_size=batch_size)
            self.labels = [str(c) for c in self.model.classes_]
        elif kind.method == "ShuffleDivide":
            from contrastext.methods.shuffle_divide.model import ShuffleDivide

            self.model = ShuffleDivide.load(folder, encode_batch_size=batch_size,
                                            **({"encode_max_length": max_length} if max_length else {}))
        elif kind.method == "PhraseTopicModel":
            from contrastext.methods.uctopic.model import PhraseTopicModel

            self.model = PhraseTopicModel.load(folder, batch_size=batch_size,
                                               **({"max_length": max_length} if max_length else {}))
        else:
            from contrastext.models import TextEncoder

            self.model = TextEncoder.from_pretrained(folder, max_length=max_length)
        self.backend = self._set_backend(backend)

    def _set_backend(self, backend: str) -> str:
        """Run the model's encoder on ``backend``; returns what it runs on (torch, onnx or onnx-int8)."""
        encoder = ENCODER_OF[self.kind.method](self.model)
        encoder.set_backend(backend)
        encoder.prepare_backend()  # export (cached) and settle int8 now, before the first chunk is timed
        return encoder.backend

    def table(self, ids: list[str], texts: list[str]) -> pa.Table:
        columns: dict[str, Any] = {"id": pa.array(ids, pa.string())}
        task = self.kind.task
        if not texts:  # every record of the chunk was left out: the schema with no rows
            return self.schema().empty_table()
        if task == "classify":
            embeddings, proba = self.model.embed_and_predict_proba(texts)
            columns |= self._classify_columns(proba)
        elif task == "cluster":
            embeddings, clusters, similarity = self.model.embed_and_predict(texts)
            columns |= {"cluster": pa.array(clusters.astype(np.int32)),
                        "score": pa.array(similarity.astype(np.float32))}
        elif task == "topics":
            documents = self.model.assign(texts)
            columns |= _topic_columns(documents)
            embeddings = (self.model.encoder.encoder.encode(texts, batch_size=self.batch_size)
                          if self.include_embedding else None)
        else:
            embeddings = self.model.encode(texts, batch_size=self.batch_size)
        if task == "embed" or self.include_embedding:
            columns["embedding"] = _fixed_rows(np.asarray(embeddings, np.float32))
        return pa.table(columns, schema=self.schema())

    def _classify_columns(self, proba: np.ndarray) -> dict[str, pa.Array]:
        k = min(self.top_k, proba.shape[1])
        top = np.argsort(-proba, axis=1, kind="stable")[:, :k]
        labels = np.asarray(self.labels, dtype=object)
        return {"label": pa.array(labels[top[:, 0]].tolist(), pa.string()),
                "score": pa.array(proba[np.arange(len(proba)), top[:, 0]].astype(np.float32)),
                "top_labels": pa.array(labels[top].tolist(), pa.list_(pa.string())),
                "top_scores": pa.array(np.take_along_axis(proba, top, axis=1).astype(np.float32).tolist(),
                                       pa.list_(pa.float32()))}

    def schema(self) -> pa.Schema:
        fields = [pa.field("id", pa.string())]
        task = self.kind.task
        if task == "classify":
            fields += [pa.field("label", pa.string()), pa.field("score", pa.float32()),
                       pa.field("top_labels", pa.list_(pa.string())), pa.field("top_scores", pa.list_(pa.float32()))]
        elif task == "cluster":
            fields += [pa.field("cluster", pa.int32()), pa.field("score", pa.float32())]
        elif task == "topics":
            fields += [pa.field("topic", pa.int32()), pa.field("score", pa.float32()),
                       pa.field("phrases", pa.list_(PHRASE_TYPE))]
        if task == "embed" or self.include_embedding:
            fields.append(pa.field("embedding", pa.list_(pa.float32(), self.dimension)))
        return pa.schema(fields)

    @property
    def dimension(self) -> int:
        encoder = {"WCSBert": lambda m: m.encoder_, "SupConClassifier": lambda m: m.model_.encoder,
                   "ShuffleDivide": lambda m: m.encoder_, "PhraseTopicModel": lambda m: m.encoder.encoder,
                   "TextEncoder": lambda m: m}[self.kind.method](self.model)
        return int(encoder.embedding_dimension)


PHRASE_TYPE = pa.struct([("phrase", pa.string()), ("start", pa.int32()), ("end", pa.int32()),
                         ("topic", pa.int32()), ("score", pa.float32())])


def _topic_columns(documents) -> dict[str, pa.Array]:
    return {"topic": pa.array([d.topic for d in documents], pa.int32()),
            "score": pa.array([d.score for d in documents], pa.float32()),
            "phrases": pa.array([[{"phrase": o.phrase, "start": o.start, "end": o.end, "topic": o.topic,
                                   "score": o.score} for o in d.phrases] for d in documents],
                                pa.list_(PHRASE_TYPE))}


def _fixed_rows(matrix: np.ndarray) -> pa.FixedSizeListArray:
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1), pa.float32()), matrix.shape[1])
